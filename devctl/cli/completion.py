"""`devctl completion bash|zsh|fish`: print the shell completion script (also shipped in completions/).

A candidate comes from the node (a device ID in the checkpoint, a pod's name)
and a shell puts it into the command line that a person then runs, often as
root. So each candidate is decided before any shell sees it: one that is not
printable text (a C0 or C1 control, DEL, a bidi mark, a line separator) is not
offered at all, and the others reach the line quoted, so that Enter passes
them as one word and never runs what they hold: bash gets each one
backslash-quoted (its ``COMPREPLY`` is inserted as it is), zsh's ``compadd`` and
fish's ``complete`` get it raw and quote it themselves. The scripts never
``eval`` what devctl prints, nor let bash split or glob it.
"""

from __future__ import annotations

import os
from enum import Enum

import typer

# The shell scripts call devctl back with this variable set; typer then completes.
COMPLETE_VAR = "_DEVCTL_COMPLETE"


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


# One candidate a line: mapfile neither splits a line at blanks nor globs it (typer's `COMPREPLY=( $(...) )` did).
BASH_SCRIPT = """\
_devctl_completion() {
    local IFS=$'\\n'
    mapfile -t COMPREPLY < <(env COMP_WORDS="${COMP_WORDS[*]}" \\
                                 COMP_CWORD="$COMP_CWORD" \\
                                 %(var)s=complete_bash "$1")
    return 0
}

complete -o default -F _devctl_completion devctl
"""

# One candidate a line, its description after a tab; compadd quotes what it inserts (no -Q), nothing is eval'd.
ZSH_SCRIPT = """\
#compdef devctl

_devctl_completion() {
  local -a values shown
  local line value described=0
  for line in "${(@f)$(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" %(var)s=complete_zsh devctl)}"; do
    [[ -z $line ]] && continue
    value=${line%%%%$'\\t'*}
    values+=("$value")
    if [[ $line == *$'\\t'* ]]; then
      shown+=("$value  -- ${line#*$'\\t'}")
      described=1
    else
      shown+=("$value")
    fi
  done
  if (( ${#values} == 0 )); then
    _files
  elif (( described )); then
    compadd -l -d shown -a values
  else
    compadd -a values
  fi
}

compdef _devctl_completion devctl
"""

# fish escapes what it inserts from a command substitution's lines; a tab starts a line's description.
FISH_SCRIPT = (
    'complete --command devctl --no-files --arguments "(env %(var)s=complete_fish'
    ' _TYPER_COMPLETE_FISH_ACTION=get-args _TYPER_COMPLETE_ARGS=(commandline -cp) devctl)"'
    ' --condition "env %(var)s=complete_fish _TYPER_COMPLETE_FISH_ACTION=is-args'
    ' _TYPER_COMPLETE_ARGS=(commandline -cp) devctl"\n'
)

SCRIPTS = {Shell.bash: BASH_SCRIPT, Shell.zsh: ZSH_SCRIPT, Shell.fish: FISH_SCRIPT}

# What bash takes literally anywhere in a word, besides letters and digits; anything else gets a backslash.
_BASH_PLAIN = frozenset("_-./:@%+=,")


def offered(value: str) -> bool:
    """Whether a candidate may reach a shell: printable text only (no control, DEL, C1, bidi mark or separator)."""
    return value.isprintable()


def bash_word(value: str) -> str:
    """``value`` as one bash word that means ``value`` (``printf %q``'s backslashes, for an ``offered`` value)."""
    return "".join(c if c.isalnum() or c in _BASH_PLAIN else "\\" + c for c in value)


def _help(text: str | None) -> str:
    """A candidate's description on one line, every control shown as an escape."""
    from devctl.escape import escape

    return escape(" ".join((text or "").split()))


def _register_shells() -> None:
    """Replace typer's shell classes by ones that refuse and quote each candidate as the module's docstring says."""
    from typer._click.shell_completion import CompletionItem, add_completion_class
    from typer._completion_classes import BashComplete, FishComplete, ZshComplete

    class Bash(BashComplete):
        def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
            return [item for item in super().get_completions(args, incomplete) if offered(item.value)]

        def format_completion(self, item: CompletionItem) -> str:
            return bash_word(item.value)

    class Zsh(ZshComplete):
        def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
            return [item for item in super().get_completions(args, incomplete) if offered(item.value)]

        def format_completion(self, item: CompletionItem) -> str:
            return f"{item.value}\t{_help(item.help)}" if item.help else item.value

        def complete(self) -> str:
            args, incomplete = self.get_completion_args()
            return "\n".join(self.format_completion(item) for item in self.get_completions(args, incomplete))

    class Fish(FishComplete):
        def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
            return [item for item in super().get_completions(args, incomplete) if offered(item.value)]

        def format_completion(self, item: CompletionItem) -> str:
            return f"{item.value}\t{_help(item.help)}" if item.help else item.value

    add_completion_class(Bash, Shell.bash.value)
    add_completion_class(Zsh, Shell.zsh.value)
    add_completion_class(Fish, Shell.fish.value)


def enable_runtime_completion() -> None:
    """Answer a completion request from the shell scripts (typer only does this when it adds its own options)."""
    if COMPLETE_VAR in os.environ:
        _register_shells()


def completion(shell: Shell = typer.Argument(..., help="The shell to print the script for.")) -> None:
    """Print the completion script, e.g. `devctl completion bash > /etc/bash_completion.d/devctl`."""
    print(SCRIPTS[shell] % {"var": COMPLETE_VAR}, end="")


def register(app: typer.Typer) -> None:
    app.command("completion")(completion)
