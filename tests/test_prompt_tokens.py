"""A long chat's prompt tokenized in pieces on the real bundled model: exactly the whole text's tokens, edit after
edit, and only the new pieces tokenized."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from localgen.chat import Message, PromptFormat
from localgen.conversation import Conversation, Turn
from localgen.engine import Engine
from localgen.params import GenerationLimits, SamplingParams
from localgen.prompt_tokens import ReusingTokenizer, split_tokens
from localgen.runner import LoadedModel, ModelOptions, load_model
from localgen.session import ChatSession
from tests import gguf_builders as gb

WORDS = "the quick brown fox jumps over the lazy dog while naïve cafés serve crème brûlée, 日本語のテキスト, 😀 "


class CountingTokenizer:
    """The engine's tokenizer, recording the length of each text it is given."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.n_vocab = engine.n_vocab
        self.n_ctx = engine.n_ctx
        self.texts: list[int] = []

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        self.texts.append(len(text))
        return self.engine.tokenize(text, add_special=add_special, parse_special=parse_special)

    def special_tokens(self) -> tuple[tuple[bytes, bool], ...]:
        return self.engine.special_tokens()

    def appends_after_text(self) -> bool:
        return self.engine.appends_after_text()


@pytest.fixture(scope="module")
def loaded(bundled_model: Path) -> Iterator[LoadedModel]:
    model = load_model(ModelOptions(model=str(bundled_model), ctx_size=8192, threads=1))
    yield model
    model.close()


def _long_chat(turns: int = 24, system: str | None = "You are terse.") -> list[Message]:
    messages = [Message("system", system)] if system is not None else []
    for number in range(turns):
        messages += [Message("user", f"Question {number}: {WORDS * 3}"),
                     Message("assistant", f"Answer {number}. {WORDS * 4}")]
    return messages


def _past_the_vocabulary(tokenizer: ReusingTokenizer, engine: Engine) -> None:
    """Tokenize as many characters as the vocabulary has tokens: what a chat does before its pieces are kept."""
    text = "plain words " * (engine.n_vocab // 12 + 1)
    assert tokenizer.tokenize(text, add_special=False) == engine.tokenize(text, add_special=False)


def _check(fmt: PromptFormat, engine: Engine, tokenizer: ReusingTokenizer, messages: list[Message]) -> list[int]:
    """The pieces' tokens, checked against the whole text's; returned."""
    text, tokens = fmt.prompt(tokenizer, messages)
    whole_text, whole = fmt.prompt(engine, messages)
    assert text == whole_text
    assert tokens == whole, "pieces must give the whole text's tokens, token for token"
    return tokens


def test_pieces_give_the_whole_texts_tokens_over_every_edit(loaded: LoadedModel) -> None:
    engine, fmt = loaded.engine, loaded.prompt_format
    counting = CountingTokenizer(engine)
    tokenizer = ReusingTokenizer(counting, fmt)  # type: ignore[arg-type]
    chat = _long_chat()
    _past_the_vocabulary(tokenizer, engine)
    assert len(_check(fmt, engine, tokenizer, chat)) < engine.n_ctx  # a chat that the context holds
    asked = [*chat, Message("user", "And now?")]
    answered = [*asked, Message("assistant", "Now this.")]
    edits = {
        "a new message": asked,
        "its answer": answered,
        "/undo": chat,
        "/regen": [*asked, Message("assistant", "Something else.")],
        "an earlier message edited": [*chat[:5], Message("user", "Edited question"), *chat[6:]],
        "a system prompt changed": [Message("system", "You are verbose."), *chat[1:]],
        "no system prompt": chat[1:],
        "multi-byte characters at the boundaries": [*chat, Message("user", "😀 é"), Message("assistant", "日本語")],
        "a lone multi-byte character": [*chat, Message("user", "é")],
        "whitespace at the boundaries": [*chat, Message("user", "  spaced  \n"), Message("assistant", "\n\n")],
        "an empty answer": [*chat, Message("user", "say nothing"), Message("assistant", "")],
        "control tokens in a message": [*chat, Message("user", "<|im_end|>\n<|im_start|>user\nhi<|im_start|>")],
        "a message that starts with one": [*chat, Message("user", "<|im_start|>assistant\nwhat<|im_end|>")],
    }
    for name, messages in edits.items():
        counting.texts.clear()
        tokens = _check(fmt, engine, tokenizer, messages)
        assert sum(counting.texts) < len(fmt.render(messages)) / 4, f"{name}: more than its new pieces tokenized"
        assert tokens


def test_a_text_that_adds_the_bos_token_keeps_it_first(bundled_model: Path, tmp_path: Path) -> None:
    adds_bos = gb.copy_with_metadata(bundled_model, tmp_path / "bos.gguf",
                                     set_values={"tokenizer.ggml.add_bos_token": True})
    loaded = load_model(ModelOptions(model=str(adds_bos), ctx_size=1024, threads=1))
    try:
        engine, fmt = loaded.engine, loaded.prompt_format
        tokenizer = ReusingTokenizer(engine, fmt)
        _past_the_vocabulary(tokenizer, engine)
        for text in (fmt.render(_long_chat()), "x" + fmt.render(_long_chat())):
            for _ in range(2):
                for add_special in (True, False):
                    expected = engine.tokenize(text, add_special=add_special)
                    assert tokenizer.tokenize(text, add_special=add_special) == expected
            assert engine.tokenize(text, add_special=True)[0] == engine.bos_token
    finally:
        loaded.close()


def test_a_template_with_no_special_tokens_is_tokenized_whole(loaded: LoadedModel) -> None:
    engine = loaded.engine
    fmt = replace(loaded.prompt_format, template="{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    counting = CountingTokenizer(engine)
    tokenizer = ReusingTokenizer(counting, fmt)  # type: ignore[arg-type]
    _past_the_vocabulary(tokenizer, engine)
    chat = _long_chat()
    for messages in (chat, [*chat, Message("user", "And now?")]):
        counting.texts.clear()
        _check(fmt, engine, tokenizer, messages)
        assert counting.texts == [len(fmt.render(messages))]


def test_short_chats_never_read_the_vocabulary(loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, fmt = loaded.engine, loaded.prompt_format
    tokenizer = ReusingTokenizer(engine, fmt)

    def refused() -> tuple[tuple[bytes, bool], ...]:
        raise AssertionError("the split tokens were looked for")

    monkeypatch.setattr(engine, "special_tokens", refused)
    chat = _long_chat(turns=2)
    for number in range(5):
        _check(fmt, engine, tokenizer, [*chat, Message("user", f"question {number}")])


def test_a_follow_up_in_a_chat_tokenizes_only_its_new_pieces(loaded: LoadedModel, bundled_model: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    options = ModelOptions(model=str(bundled_model), ctx_size=8192, threads=1)
    turns = [Turn(user=m.content, answer=a.content) for m, a in zip(_long_chat(system=None)[::2],
                                                                    _long_chat(system=None)[1::2], strict=True)]
    session = ChatSession(loaded, options, replace(Conversation.new(system=None, model=None), turns=turns),
                          SamplingParams(temperature=0.0), GenerationLimits(max_tokens=8), autosave=False)
    tokenized: list[int] = []
    tokenize = loaded.engine.tokenize

    def counted(text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        tokenized.append(len(text))
        return tokenize(text, add_special=add_special, parse_special=parse_special)

    monkeypatch.setattr(loaded.engine, "tokenize", counted)
    for typed in ("W", "Wh", "What", "What now", "What now?"):
        tokenized.clear()
        messages = session._planned(typed).messages()
        text, tokens = session._prompt(messages)
        assert tokens == tokenize(text, add_special=False)
    assert sum(tokenized) < 100, "the typed message's pieces alone are tokenized"


def test_split_tokens_keep_only_those_the_tokenizer_starts_over_at() -> None:
    specials = [(b"<|im_start|>", False), (b"<|im_end|>", False), (b"<|endoftext|>", False)]
    candidates = frozenset({"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|not_special|>"})
    assert split_tokens(specials, candidates) == {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}
    assert split_tokens([(b"<|im_end|>", True)], frozenset({"<|im_end|>"})) == set(), "lstrip takes the text before"
    assert split_tokens([(b" <s>", False), (b"</s>\n", False)], frozenset({" <s>", "</s>\n"})) == set(), \
        "whitespace at its edges that a strip could take"
    assert split_tokens([(b"<a<a", False)], frozenset({"<a<a"})) == set(), "two occurrences could overlap"
    end, ends = (b"<|im_end|>", False), frozenset({"<|im_end|>"})
    assert split_tokens([end, (b"the end:<|im", False)], ends) == set(), "a longer special token runs into its start"
    assert split_tokens([end, (b"end<|im_end|>x", False)], ends) == set(), "a longer one holds it"
    assert split_tokens([end, (b"d<", False)], ends) == ends, "a shorter one is found after it"
    assert split_tokens([end, (b"<|im_end|>\n", True)], ends) == set(), "a longer one starting with it takes spaces"
    assert split_tokens([end, (b"<|im_end|>\n", False)], ends) == ends


@pytest.mark.parametrize("space_prefix", [True, False])
def test_pieces_give_the_whole_texts_tokens_with_a_sentencepiece_vocabulary(tmp_path: Path, space_prefix: bool) -> None:
    """SentencePiece puts a space before the text after a special token (add_space_prefix, where the model has it),
    which each piece must get as the whole text does: texts of control tokens, BOS and EOS, spaces, newlines and
    words, tokenized in pieces (reused ones too) and whole, with and without the special tokens added."""
    path = gb.tiny_model(tmp_path / "spm.gguf", tokenizer="llama", spm_controls=("<|im_start|>", "<|im_end|>"))
    if not space_prefix:
        path = gb.copy_with_metadata(path, tmp_path / "no-prefix.gguf",
                                     set_values={"tokenizer.ggml.add_space_prefix": False})
    loaded = load_model(ModelOptions(model=str(path), ctx_size=256, threads=1))
    try:
        engine = loaded.engine
        counting = CountingTokenizer(engine)
        tokenizer = ReusingTokenizer(counting, loaded.prompt_format)  # type: ignore[arg-type]
        _past_the_vocabulary(tokenizer, engine)
        atoms = ["<|im_start|>", "<|im_end|>", "<s>", "</s>", " ", "  ", "\n", "the", "t", "he", "user", "é", " \n "]
        draw = random.Random(1)
        texts = ["".join(draw.choice(atoms) for _ in range(draw.randint(0, 14))) for _ in range(400)]
        for text in [*texts, *texts[:50]]:
            for add in (False, True):
                assert tokenizer.tokenize(text, add_special=add) == engine.tokenize(text, add_special=add), (text, add)
        chat = "<|im_start|>user hello<|im_end|>\n<|im_start|>assistant hi<|im_end|>\n"
        tokenizer.tokenize(chat, add_special=True)
        counting.texts.clear()
        assert tokenizer.tokenize(chat + "<|im_start|>user bye", add_special=True) == engine.tokenize(
            chat + "<|im_start|>user bye", add_special=True)
        assert counting.texts == [len("<|im_start|>user bye")], "the pieces seen are reused: the text is cut"
    finally:
        loaded.close()


def test_the_chat_s_and_the_typing_s_threads_read_the_special_tokens_once(loaded: LoadedModel) -> None:
    """The chat's thread and the prefill-while-typing's, past the vocabulary's length at once, read its special
    tokens once (16 ms), where both could read them."""
    counting = CountingTokenizer(loaded.engine)
    reads = []

    def slow_special_tokens() -> tuple[tuple[bytes, bool], ...]:
        reads.append(threading.current_thread().name)
        time.sleep(0.2)
        return loaded.engine.special_tokens()

    counting.special_tokens = slow_special_tokens  # type: ignore[method-assign]
    tokenizer = ReusingTokenizer(counting, loaded.prompt_format)  # type: ignore[arg-type]
    text = "<|im_start|>user\n" + "plain words " * (loaded.engine.n_vocab // 12 + 1) + "<|im_end|>\n"
    threads = [threading.Thread(target=tokenizer.tokenize, args=(text,), kwargs={"add_special": False})
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reads) == 1, reads
