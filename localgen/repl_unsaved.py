"""Leaving a chat's conversation while changes a save missed are not on disk: they are saved first, or left only
when the user repeats what leaves them (at once, and without a word, in a chat its start said cannot be saved)."""

from __future__ import annotations

from localgen import console
from localgen.errors import LocalgenError
from localgen.repl_input import ALIASES
from localgen.session import ChatSession
from localgen.session_turns import UnsavedChangeError

CHAT_ENDS = ("/exit", "Ctrl-D")  # the actions after which there is no conversation left to save


class LeaveGuard:
    """What the chat does with unsaved changes when something would leave their conversation."""

    def __init__(self, session: ChatSession, *, unsaveable: bool = False) -> None:
        self.session = session
        self._unsaveable = unsaveable  # the start said this chat cannot be saved, and no save has worked since
        self._warned: str | None = None  # the action just warned that it leaves unsaved changes: again, it does
        self._left = False  # the chat ends leaving its changes unsaved, by choice

    @property
    def quiet(self) -> bool:
        """Whether saves that fail go unsaid, and nothing they missed holds the chat: its start said it cannot be
        saved, and no conversation of it has been on disk since (one that was keeps the guard from then on)."""
        self._unsaveable = self._unsaveable and not self.session.conversation.on_disk
        return self._unsaveable

    def next_input(self, command: str | None) -> None:
        """Another line came (command: its slash command, if any): a warning holds only for the very next one (the
        ways to end the chat stand for each other: Ctrl-D, then /exit, ends it)."""
        if command is None or not self._repeats(ALIASES.get(command, command)):
            self._warned = None

    def _repeats(self, action: str) -> bool:
        """Whether action is the one just warned of, or ends the chat as that one would have."""
        return action == self._warned or (action in CHAT_ENDS and self._warned in CHAT_ENDS)

    def say_unsaved(self, error: UnsavedChangeError) -> None:
        """Say why a change is not saved, and that the chat keeps it (unless the chat is quiet about saves)."""
        if not self.quiet:
            kept = "this chat keeps the change and saves it with the next one"
            console.error(error.message, f"{error.hint}; {kept}" if error.hint else kept)

    def may_leave(self, action: str, typed: str | None = None) -> bool:
        """Whether the chat may leave its conversation (action: what would leave it; typed: the command as typed,
        /bye for /exit): yes once the changes a save missed are saved now; when they still cannot be, no, after
        saying so, and yes for the same action again. A Ctrl-C during that save lets it finish, then stops the action
        (KeyboardInterrupt)."""
        if not self.session.unsaved:
            return True
        try:
            self.session.save(stoppable=True)
            return True
        except LocalgenError as exc:
            if self.quiet or self._repeats(action):
                self._left = action in CHAT_ENDS
                return True
            console.error(exc.message, exc.hint)
        self._warned = action
        said = typed if typed and ALIASES.get(typed, typed) == action else action
        console.say(f"the latest changes to {self.session.conversation.name} are not saved; /save NAME saves them "
                    f"under another name, {said} again leaves without them (they are saved then if the problem is "
                    "fixed)")
        return False

    def last_save(self) -> None:
        """As the chat ends however it ends (a signal, a lost terminal): save changes a save missed, or say they are
        lost (unless the user chose to leave them, or the chat is quiet about saves)."""
        if self.session.unsaved and not self._left:
            try:
                self.session.save()
            except LocalgenError as exc:
                if not self.quiet:
                    console.error(f"the latest changes to {self.session.conversation.name} were not saved: "
                                  f"{exc.message}")
        console.warn_each(self.session.save_notes)

