"""Whether llama.cpp's AMX buffers are used: the probe in a child process, its kept verdict, and what a run meets."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import resource
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localgen import config, storage
from localgen.engine import amx, devices, loading
from localgen.engine.devices import cpu_extra_buffer_types
from localgen.errors import ConfigError, LocalgenError
from localgen.estimate import estimate_memory, read_shape
from localgen.hardware import cpu_repack_types, probe_hardware
from localgen.runner import ModelOptions, load_model
from tests.conftest import REPO_ROOT, bundled_model_file, run_localgen

# The tests that run the real probe or a run in AMX buffers run alone (serial): both are timed (conftest); those of a
# stand-in probe child, which a busy machine can only make slower than its limit, run beside the others.

CRASH_SCRIPT = "import os, resource, signal\nresource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n" \
               "os.kill(os.getpid(), signal.SIGSEGV)\n"


@pytest.fixture(scope="module")
def verdict() -> amx.Verdict:
    """The probe's verdict on this machine's build, found once for the module."""
    return amx.probe(bundled_model_file(), "key")


@pytest.mark.serial
def test_the_probe_s_verdict_is_what_a_run_with_amx_buffers_meets(verdict: amx.Verdict, tmp_path: Path) -> None:
    """Where the probe finds AMX working, a run in AMX buffers answers; where it finds a crash, such a run crashes
    too; without AMX on this CPU, the probe's model loads without AMX buffers."""
    if amx.AMX_BUFFER_TYPE not in cpu_extra_buffer_types():
        assert verdict == amx.Verdict("key", False, "the model loaded without AMX buffers")
        return
    result = subprocess.run([sys.executable, "-m", "localgen", "run", "-n", "4", "--temperature", "0",
                             "Why is the sky blue?"], capture_output=True, text=True, timeout=120, check=False,
                            env={**os.environ, "LOCALGEN_AMX": "1", "LOCALGEN_DEBUG": "1"}, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, preexec_fn=_no_core_file)
    if verdict.works:
        assert result.returncode == 0, result.stderr[-2000:]
        assert "AMX model buffer size" in result.stderr
    else:
        assert verdict.detail.startswith(amx.CRASHED), verdict
        assert result.returncode < 0, (result.returncode, result.stderr[-2000:])


def _no_core_file() -> None:
    """In a child about to crash on purpose: no core file."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _needs_working_amx(verdict: amx.Verdict) -> None:
    if not verdict.works:
        pytest.skip(f"llama.cpp's AMX kernels do not work with this build here ({verdict.detail})")


@pytest.mark.serial
def test_in_amx_buffers_the_prompt_cache_and_a_continued_run_answer(verdict: amx.Verdict, tmp_path: Path) -> None:
    """The paths that reuse a KV state (a cached document's prefix, a conversation continued) run in AMX buffers."""
    _needs_working_amx(verdict)
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(f"Line {n} of the notes says the valve {n % 7} is open." for n in range(120)))
    env = {"LOCALGEN_AMX": "1", "LOCALGEN_HOME": str(tmp_path / "home")}
    for question in ("Which valve is open?", "Which line is first?"):
        result = run_localgen("run", "-f", str(doc), question, "-n", "8", "--json", env=env)
        assert result.returncode == 0, result.err[-2000:]
    assert json.loads(result.out)["usage"]["prompt_cache_tokens"] > 0, result.out
    continued = run_localgen("run", "--continue", "And the last?", "-n", "8", env=env)
    assert continued.returncode == 0 and continued.out.strip(), continued.err[-2000:]


@pytest.mark.serial
def test_in_amx_buffers_the_memory_estimate_counts_the_weights_copy(verdict: amx.Verdict) -> None:
    """AMX buffers hold a copy of the weights its kernels take: the estimate counts it, as measured."""
    _needs_working_amx(verdict)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "fit_measure.py"), "child",
                           str(bundled_model_file()), "2048", "f16", "on", "256"], capture_output=True, text=True,
                          timeout=300, cwd=REPO_ROOT, check=False, env={**os.environ, "LOCALGEN_AMX": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    measured = record["after"]["VmHWM"] - record["base"]["VmRSS"]
    shape = read_shape(bundled_model_file())
    with_copy = estimate_memory(shape, n_ctx=2048, flash_attn=True,
                                repack_types=cpu_repack_types() | amx.AMX_WEIGHT_TYPES)
    assert abs(with_copy.rss_bytes - measured) / measured < 0.25, (with_copy, measured)


@pytest.mark.parametrize(("script", "works", "detail"), [
    ("raise SystemExit(0)", True, "a batch decoded in AMX buffers"),
    ("raise SystemExit(3)", False, "the model loaded without AMX buffers"),
    ("raise SystemExit(1)", False, "the child exited with 1"),
    (CRASH_SCRIPT, False, "the child died of signal 11 in a batch decoded in AMX buffers"),
])
def test_the_verdict_follows_how_the_child_ended(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str,
                                                  works: bool, detail: str) -> None:
    monkeypatch.setattr(amx, "PROBE_SCRIPT", script)
    assert amx.probe(tmp_path / "model.gguf", "key") == amx.Verdict("key", works, detail)


def test_a_child_killed_by_another_signal_gives_no_verdict(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(amx, "PROBE_SCRIPT", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert amx.probe(tmp_path / "model.gguf", "key") == amx.Verdict("key", False, "could not run")


def test_a_probe_that_runs_too_long_counts_as_not_working(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(amx, "PROBE_SCRIPT", "import time; time.sleep(30)")
    monkeypatch.setattr(amx, "PROBE_TIMEOUT_S", 0.5)
    assert amx.probe(tmp_path / "model.gguf", "key") == amx.Verdict("key", False, "could not run")


@pytest.fixture()
def probing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """amx_works with its own cache folder, a stand-in library file and a probe that answers True; the keys probed."""
    monkeypatch.setenv("LOCALGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(config, "_settings", None)
    library = tmp_path / "libggml-cpu.so"
    library.write_bytes(b"first build")
    monkeypatch.setattr(amx, "cpu_library", lambda: library)
    monkeypatch.setattr(amx, "_probe_model", lambda: tmp_path / "model.gguf")
    probed: list[str] = []

    def probe(model: Path, key: str) -> amx.Verdict:
        probed.append(key)
        return amx.Verdict(key, True, "a batch decoded in AMX buffers")

    monkeypatch.setattr(amx, "probe", probe)
    amx.amx_works.cache_clear()
    yield probed
    amx.amx_works.cache_clear()
    monkeypatch.setattr(config, "_settings", None)


def _kept_file() -> Path:
    return config.settings().cache_dir / amx.PROBE_FILE


def test_a_kept_verdict_is_used_until_the_library_changes(probing: list[str]) -> None:
    assert amx.amx_works() is True and len(probing) == 1
    kept = json.loads(_kept_file().read_text())
    assert kept == {"key": probing[0], "works": True, "detail": "a batch decoded in AMX buffers"}
    amx.amx_works.cache_clear()
    assert amx.amx_works() is True and len(probing) == 1  # a later process reads it
    library = amx.cpu_library()
    library.write_bytes(b"a rebuilt library")
    os.utime(library, ns=(1, 1))
    amx.amx_works.cache_clear()
    assert amx.amx_works() is True and len(probing) == 2 and probing[1] != probing[0]


def test_a_damaged_kept_verdict_is_probed_again(probing: list[str]) -> None:
    _kept_file().parent.mkdir(parents=True)
    _kept_file().write_text('{"key": ')
    assert amx.amx_works() is True and len(probing) == 1
    assert json.loads(_kept_file().read_text())["works"] is True


def test_a_verdict_for_another_build_is_not_used(probing: list[str]) -> None:
    _kept_file().parent.mkdir(parents=True)
    _kept_file().write_text(json.dumps({"key": "another", "works": False, "detail": "x"}))
    assert amx.amx_works() is True and len(probing) == 1


def test_without_the_bundled_model_amx_stays_off_and_nothing_is_kept(probing: list[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amx, "_probe_model", lambda: None)
    assert amx.amx_works() is False and probing == []
    assert not _kept_file().exists()


def test_a_probe_that_could_not_run_is_not_kept(probing: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amx, "probe", lambda model, key: amx.Verdict(key, False, "could not run"))
    assert amx.amx_works() is False
    assert not _kept_file().exists()


@pytest.mark.parametrize(("value", "chosen"), [("1", True), ("0", False), ("auto", None), (" AUTO ", None), ("", None)])
def test_localgen_amx_takes_1_0_or_auto_as_the_readme_says(monkeypatch: pytest.MonkeyPatch, value: str,
                                                            chosen: bool | None) -> None:
    monkeypatch.setenv("LOCALGEN_AMX", value)
    monkeypatch.setattr(config, "_settings", None)
    config.check_environment()
    assert config.settings().amx is chosen


@pytest.mark.parametrize("value", ["yes", "on", "true", "off", "no", "2"])
def test_localgen_amx_set_to_another_value_is_refused_naming_its_values(monkeypatch: pytest.MonkeyPatch,
                                                                        value: str) -> None:
    """yes or on would read as "use AMX where it works", and forced its kernels on, which crash some builds."""
    monkeypatch.setenv("LOCALGEN_AMX", value)
    monkeypatch.setattr(config, "_settings", None)
    with pytest.raises(ConfigError) as refused:
        config.check_environment()
    assert refused.value.message == f"LOCALGEN_AMX={value} is none of its values: auto, 1 or 0"
    assert refused.value.hint == ("LOCALGEN_AMX=auto (or unset) uses Intel AMX where a probe finds it works with this "
                                  "build, 1 without the probe (the kernels crash some builds), 0 never")
    assert "LOCALGEN_AMX=1` uses AMX buffers without the probe, `LOCALGEN_AMX=0` never, `LOCALGEN_AMX=auto`" in \
        " ".join((REPO_ROOT / "README.md").read_text().split()), "README says the same values"


@pytest.mark.parametrize(("offered", "amx_env", "probed", "expected", "declined"), [
    ((), "", None, True, ""),
    (("CPU_REPACK",), "", None, True, ""),
    (("AMX", "CPU_REPACK"), "", False, False, "AMX fails with this build"),
    (("AMX", "CPU_REPACK"), "", True, True, ""),
    (("AMX", "CPU_REPACK"), "auto", False, False, "AMX fails with this build"),
    (("AMX", "CPU_REPACK"), "1", None, True, ""),
    (("AMX", "CPU_REPACK"), "0", None, False, "LOCALGEN_AMX=0"),
])
def test_extra_buffers_follow_the_probe_unless_localgen_amx_is_set(
        monkeypatch: pytest.MonkeyPatch, offered: tuple[str, ...], amx_env: str, probed: bool | None,
        expected: bool, declined: str) -> None:
    calls: list[bool] = []

    def amx_works() -> bool:
        calls.append(True)
        assert probed is not None, "probed where the answer was known without it"
        return probed

    monkeypatch.setattr(loading, "cpu_extra_buffer_types", lambda: offered)
    monkeypatch.setattr(loading, "amx_works", amx_works)
    monkeypatch.setenv("LOCALGEN_AMX", amx_env)
    monkeypatch.setattr(config, "_settings", None)
    assert loading.use_cpu_extra_buffers() is expected
    assert loading.extra_buffers_declined() == declined  # what `localgen bench`'s header says
    assert bool(calls) is (probed is not None)
    monkeypatch.setattr(config, "_settings", None)


TILE_CONFIG_PROGRAM = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

struct tile_config { uint8_t palette_id, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; };

__attribute__((noinline)) static void load_config(void) {
    _Alignas(64) struct tile_config config = {0};
    config.palette_id = 1;
    config.rows[0] = 8;
    config.colsb[0] = 64;
    config.rows[2] = 16;
    config.colsb[2] = 32;
    _tile_loadconfig(&config);
}

int main(void) {
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) return 2;
    load_config();
    _Alignas(64) struct tile_config back;
    _tile_storeconfig(&back);
    printf("%u %u %u %u %u\n", back.palette_id, back.rows[0], back.colsb[0], back.rows[2], back.colsb[2]);
    return 0;
}
"""


def test_the_fix_header_makes_gcc_load_the_whole_tile_configuration(tmp_path: Path) -> None:
    """Built by GCC with scripts/amx_tile_config_fix.h forced in (as rebuild_llama_cpp.py builds llama.cpp), a tile
    configuration's rows and columns reach the CPU; GCC 12 alone loads only its first bytes (rows 0)."""
    gcc = shutil.which("gcc")
    if gcc is None or platform.machine() != "x86_64" or "amx_tile" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("needs GCC on an x86-64 CPU with AMX")
    source = tmp_path / "tile_config.c"
    source.write_text(TILE_CONFIG_PROGRAM)
    header = REPO_ROOT / "scripts" / "amx_tile_config_fix.h"
    built = subprocess.run([gcc, "-O2", "-mamx-tile", "-include", str(header), str(source), "-o",
                            str(tmp_path / "tile_config")], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.skip(f"this GCC cannot build AMX code: {built.stderr[-300:]}")
    ran = subprocess.run([str(tmp_path / "tile_config")], capture_output=True, text=True, check=False)
    if ran.returncode == 2:
        pytest.skip("the kernel does not grant AMX state")
    assert (ran.returncode, ran.stdout) == (0, "1 8 64 16 32\n")


def test_the_rebuild_script_forces_the_fix_header_into_a_source_build_of_the_installed_version() -> None:
    result = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "rebuild_llama_cpp.py"), "--dry-run"],
                            capture_output=True, text=True, check=False, env={**os.environ, "CMAKE_ARGS": "-DX=1"})
    assert result.returncode == 0, result.stderr
    version = importlib.metadata.version("llama-cpp-python")
    cmake_args, *command = shlex.split(result.stdout)
    found = re.fullmatch(r"CMAKE_ARGS=-DX=1 -DCMAKE_C_FLAGS=-include(\S+) -DCMAKE_CXX_FLAGS=-include(\S+)", cmake_args)
    assert found and found[1] == found[2] and found[1].endswith("/amx_tile_config_fix.h"), cmake_args
    assert command == [sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-cache-dir",
                       "--no-binary", "llama-cpp-python", f"llama-cpp-python=={version}"]


def test_a_crash_found_is_said_once_with_the_way_to_the_fix(probing: list[str], monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(amx, "probe", lambda model, key: amx.Verdict(key, False, f"{amx.CRASHED} 11 in a batch"))
    assert amx.amx_works() is False
    said = capsys.readouterr().err
    assert said.count("crash") == 1 and "scripts/rebuild_llama_cpp.py" in said, said
    amx.amx_works.cache_clear()
    assert amx.amx_works() is False
    assert capsys.readouterr().err == ""


def test_a_verdict_that_cannot_be_kept_is_said_with_the_crash_and_probed_again(
        probing: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def full_disk(path: Path, *_: object, **__: object) -> bool:
        raise LocalgenError(f"could not write {path}: No space left on device")

    probed: list[str] = []
    monkeypatch.setattr(amx, "probe", lambda model, key: probed.append(key) or amx.Verdict(key, False,
                                                                                          f"{amx.CRASHED} 11"))
    monkeypatch.setattr(storage, "atomic_write_text", full_disk)
    assert amx.amx_works() is False
    said = capsys.readouterr().err
    assert "scripts/rebuild_llama_cpp.py" in said and "could not be kept (could not write" in said, said
    assert "No space left on device), so it runs again next time" in said
    amx.amx_works.cache_clear()
    assert amx.amx_works() is False and len(probed) == 2 and not _kept_file().exists()


def test_a_model_file_that_is_no_gguf_is_refused_before_the_probe_runs(
        probing: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The probe (a second or so, once per build) waits for the memory plan, after the model file's own checks."""
    monkeypatch.delenv("LOCALGEN_AMX", raising=False)
    monkeypatch.setattr(config, "_settings", None)
    monkeypatch.setattr(loading, "cpu_extra_buffer_types", lambda: (amx.AMX_BUFFER_TYPE, "CPU_REPACK"))
    monkeypatch.setattr(devices, "cpu_extra_buffer_types", lambda: (amx.AMX_BUFFER_TYPE, "CPU_REPACK"))
    notes = tmp_path / "notes.gguf"
    notes.write_text("# notes\n")
    with pytest.raises(LocalgenError, match="not a GGUF file"), config.offline_given(True):
        load_model(ModelOptions(model=str(notes)))
    assert probing == []
    assert probe_hardware().cpu_repack_types >= amx.AMX_WEIGHT_TYPES and len(probing) == 1
