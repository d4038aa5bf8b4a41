"""The folder variables (LOCALGEN_HOME, HF_HOME, HF_HUB_CACHE, XDG_*_HOME, HOME) checked as a command starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import HubServer, child_env, make_gguf_bytes

from tests.conftest import bundled_model_file, run_localgen_process

FOLDER_SETTINGS = ("LOCALGEN_HOME", "HF_HOME", "HF_HUB_CACHE", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")


def _localgen(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`localgen ARGS` started in tmp_path/cwd with HOME tmp_path/home and only env's folder variables set."""
    (tmp_path / "cwd").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in FOLDER_SETTINGS} | {"HOME": str(tmp_path / "home")}
    return run_localgen_process([sys.executable, "-m", "localgen", *args], env=base | env, cwd=tmp_path / "cwd",
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _refused(result: subprocess.CompletedProcess[str], error: str) -> bool:
    """True where the command wrote nothing and exited 1 with this one-line error."""
    return (result.returncode, result.stdout, result.stderr) == (1, "", f"localgen: error: {error}\n")


def test_an_xdg_folder_naming_a_file_is_refused_up_front_by_its_name(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("not a folder")
    hint = "(hint: point {} at a directory (it is created if missing), or unset it)"
    cache = _localgen(tmp_path, "cache", XDG_CACHE_HOME=str(file))
    assert _refused(cache, f"XDG_CACHE_HOME={file} is not a directory {hint.format('XDG_CACHE_HOME')}"), cache.stderr
    run = _localgen(tmp_path, "run", "-n", "2", "hi", XDG_CONFIG_HOME=str(file))  # its models.toml unread
    assert _refused(run, f"XDG_CONFIG_HOME={file} is not a directory {hint.format('XDG_CONFIG_HOME')}"), run.stderr
    inside = _localgen(tmp_path, "models", "default", XDG_DATA_HOME=str(file / "data"))
    assert _refused(inside, f"XDG_DATA_HOME={file / 'data'} is inside {file}, which is not a directory "
                            f"{hint.format('XDG_DATA_HOME')}"), inside.stderr
    homes = {"LOCALGEN_HOME": str(tmp_path / "lg")}
    hub = _localgen(tmp_path, "models", "default", XDG_CACHE_HOME=str(file), **homes)  # huggingface_hub's files
    assert _refused(hub, f"XDG_CACHE_HOME={file} is not a directory {hint.format('XDG_CACHE_HOME')}"), hub.stderr
    unread = _localgen(tmp_path, "models", "default", XDG_CACHE_HOME=str(file), XDG_CONFIG_HOME=str(file),
                       HF_HOME=str(tmp_path / "hf"), **homes)
    assert unread.returncode == 0, unread.stderr
    (tmp_path / "cwd" / "file").write_text("not a folder")
    relative = _localgen(tmp_path, "models", "default", XDG_CONFIG_HOME="file")  # ignored, as the XDG spec says
    assert relative.returncode == 0, relative.stderr


def test_an_xdg_folder_of_spaces_alone_is_ignored_as_a_relative_one_is(tmp_path: Path) -> None:
    result = _localgen(tmp_path, "models", "default", "smollm2-135m", XDG_CONFIG_HOME="  ", XDG_DATA_HOME=" ",
                       XDG_CACHE_HOME="\t")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "home" / ".config" / "localgen" / "models.toml").is_file()
    assert list((tmp_path / "cwd").iterdir()) == [], "no folder made under the current one"


@pytest.mark.parametrize("name", ["LOCALGEN_HOME", "HF_HOME", "HF_HUB_CACHE", "XDG_DATA_HOME"])
@pytest.mark.parametrize("spaced", [" {}", "{} ", "\t{}\n"])
def test_a_folder_variable_with_spaces_around_it_is_refused_with_the_value_without_them(
        tmp_path: Path, name: str, spaced: str) -> None:
    folder = str(tmp_path / "folder")
    result = _localgen(tmp_path, "run", "-n", "2", "hi", **{name: spaced.format(folder)})
    assert _refused(result, f"{name} {spaced.format(folder)!r} has spaces around the folder, and they would be part "
                            f"of its name (hint: set {name}={folder} (without the spaces), or unset it)"), result.stderr
    assert list((tmp_path / "cwd").iterdir()) == [], "no folder made under the current one"


def test_a_folder_variable_of_spaces_alone_is_refused_with_a_hint_to_unset_it(tmp_path: Path) -> None:
    result = _localgen(tmp_path, "run", "-n", "2", "hi", LOCALGEN_HOME="  ")
    assert _refused(result, "LOCALGEN_HOME '  ' has spaces around the folder, and they would be part of its name "
                            "(hint: unset it)"), result.stderr


LINK_HINT = "(hint: point the link at a folder that is there or remove it, point LOCALGEN_HOME at another directory, " \
            "or unset it)"


def test_a_folder_variable_on_a_link_to_nothing_names_the_missing_folder(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "unmounted" / "disk")
    result = _localgen(tmp_path, "run", "-n", "2", "hi", LOCALGEN_HOME=str(link))
    assert _refused(result, f"LOCALGEN_HOME={link} is a link to {tmp_path / 'unmounted' / 'disk'}, which is not "
                            f"there {LINK_HINT}"), result.stderr
    inside = _localgen(tmp_path, "run", "-n", "2", "hi", LOCALGEN_HOME=str(link / "localgen"))
    assert _refused(inside, f"LOCALGEN_HOME={link / 'localgen'} is inside {link}, a link to "
                            f"{tmp_path / 'unmounted' / 'disk'}, which is not there {LINK_HINT}"), inside.stderr
    assert not (tmp_path / "unmounted").exists()


def test_a_folder_variable_on_a_link_loop_or_a_link_through_a_file_says_so(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    looped = _localgen(tmp_path, "run", "-n", "2", "hi", LOCALGEN_HOME=str(loop / "localgen"))
    assert _refused(looped, f"LOCALGEN_HOME={loop / 'localgen'} is inside {loop}, a link to loop, which leads into a "
                            f"loop of links {LINK_HINT}"), looped.stderr
    file = tmp_path / "file"
    file.write_text("not a folder")
    through = tmp_path / "through"
    through.symlink_to(file / "localgen")
    result = _localgen(tmp_path, "run", "-n", "2", "hi", LOCALGEN_HOME=str(through))
    assert _refused(result, f"LOCALGEN_HOME={through} is a link to {file / 'localgen'}, which cannot be there: {file} "
                            f"is a file {LINK_HINT}"), result.stderr


def test_a_relative_home_is_refused_where_files_would_be_kept_under_it(tmp_path: Path) -> None:
    result = _localgen(tmp_path, "models", "default", "smollm2-135m", HOME="relhome")
    assert _refused(result, "HOME=relhome is not an absolute path, so the folders kept under it would follow the "
                            "current folder (hint: set HOME to your home folder's absolute path or unset it, or set "
                            "LOCALGEN_HOME and HF_HOME to folders of their own)"), result.stderr
    assert list((tmp_path / "cwd").iterdir()) == [], "no models.toml under the current folder"
    homes = {"LOCALGEN_HOME": str(tmp_path / "lg"), "HF_HOME": str(tmp_path / "hf")}
    unread = _localgen(tmp_path, "models", "default", "smollm2-135m", HOME="relhome", **homes)
    assert unread.returncode == 0, unread.stderr
    assert (tmp_path / "lg" / "config" / "models.toml").is_file() and list((tmp_path / "cwd").iterdir()) == []


def test_an_empty_home_is_refused_where_files_would_be_kept_under_it(tmp_path: Path) -> None:
    """Python takes / for ~ where HOME is empty: localgen's folders would be /.config/localgen and the like."""
    said = "HOME is set but empty, so the folders kept under it would be made under / (hint: set HOME to your home " \
           "folder's absolute path or unset it, or set {})"
    both = _localgen(tmp_path, "conversations", HOME="")  # (it reads, and makes nothing)
    assert _refused(both, said.format("LOCALGEN_HOME and HF_HOME to folders of their own")), both.stderr
    own = _localgen(tmp_path, "conversations", HOME="", HF_HOME=str(tmp_path / "hf"))
    assert _refused(own, said.format("LOCALGEN_HOME to a folder of its own")), own.stderr
    hub = _localgen(tmp_path, "conversations", HOME="", LOCALGEN_HOME=str(tmp_path / "lg"))
    assert _refused(hub, said.format("HF_HOME to a folder of its own")), hub.stderr
    homes = {"LOCALGEN_HOME": str(tmp_path / "lg"), "HF_HOME": str(tmp_path / "hf")}
    unread = _localgen(tmp_path, "models", "default", "smollm2-135m", HOME="", **homes)
    assert unread.returncode == 0, unread.stderr
    assert (tmp_path / "lg" / "config" / "models.toml").is_file() and list((tmp_path / "cwd").iterdir()) == []


def test_a_relative_xdg_cache_home_keeps_no_download_under_the_current_folder(loopback_hub: HubServer,
                                                                            tmp_path: Path) -> None:
    loopback_hub.add_repo("org/rel-GGUF", {"m-Q8_0.gguf": make_gguf_bytes("q8", 2**17)})
    hub_env = {k: v for k, v in child_env(loopback_hub, tmp_path).items() if k not in (*FOLDER_SETTINGS, "HOME")}
    for value in ("rel", ""):  # ignored, as the XDG spec says: huggingface_hub's default under HOME
        result = _localgen(tmp_path, "pull", "org/rel-GGUF:Q8_0", **hub_env, XDG_CACHE_HOME=value)
        assert result.returncode == 0, result.stderr
        assert list((tmp_path / "cwd").iterdir()) == [], "nothing under the current folder"
    pulled = tmp_path / "home" / ".cache" / "huggingface" / "hub" / "models--org--rel-GGUF"
    assert [p.name for p in pulled.rglob("*.gguf")] == ["m-Q8_0.gguf"]


def test_home_is_checked_only_where_a_folder_is_kept_under_it(tmp_path: Path) -> None:
    homes = {"LOCALGEN_HOME": str(tmp_path / "lg"), "HF_HUB_CACHE": str(tmp_path / "hub")}
    for home in ("/dev/null", "rel"):  # an offline run with both set keeps nothing under HOME
        result = _localgen(tmp_path, "run", "-m", str(bundled_model_file()), "-n", "4", "hi", HOME=home, **homes)
        assert result.returncode == 0 and result.stdout, result.stderr
    hint = "(hint: set HOME to your home folder's absolute path or unset it, or set {} to a folder of its own)"
    for unset in homes:  # localgen's folders, or huggingface_hub's hub cache, under HOME
        kept = {name: value for name, value in homes.items() if name != unset}
        result = _localgen(tmp_path, "run", "-m", str(bundled_model_file()), "-n", "4", "hi", HOME="/dev/null", **kept)
        moved = "LOCALGEN_HOME" if unset == "LOCALGEN_HOME" else "HF_HOME"
        assert _refused(result, f"HOME=/dev/null is not a directory {hint.format(moved)}"), result.stderr
    assert list((tmp_path / "cwd").iterdir()) == []
