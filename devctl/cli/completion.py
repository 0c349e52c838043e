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
import sys
from collections.abc import Callable
from enum import Enum
from typing import Any

import typer

# The shell scripts call devctl back with this variable set (and the words typed in COMP_WORDS and COMP_CWORD,
# or _TYPER_COMPLETE_ARGS, the names typer's scripts used): devctl.cli.app then answers with `respond`.
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
    from devctl.base.escape import escape

    return escape(" ".join((text or "").split()))


def split_words(line: str) -> list[str]:
    """A command line's words as the shell would split them, a quote or escape left open kept as typed."""
    import shlex

    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    try:
        words.extend(lexer)
    except ValueError:  # the line ends inside a quote or after a backslash: that word as far as it goes
        words.append(lexer.token)
    return words


def _request(shell: str) -> tuple[list[str], str]:
    """The words before the one being completed (after ``devctl``), and that one: as each script sends them."""
    if shell == Shell.bash.value:
        words = split_words(os.environ.get("COMP_WORDS", ""))
        cword = int(os.environ.get("COMP_CWORD", "0") or 0)
        return words[1:cword], words[cword] if 0 <= cword < len(words) else ""
    line = os.environ.get("_TYPER_COMPLETE_ARGS", "")
    words = split_words(line)[1:]
    if words and not line.endswith(" "):
        return words[:-1], words[-1]
    return words, ""


def _option_like(word: str) -> bool:
    return bool(word) and not word[0].isalnum()


def _takes_value(param: Any) -> bool:
    return param.param_type_name == "option" and not getattr(param, "is_flag", False) and not param.count


def _named(params: list[Any], word: str) -> Any:
    """The option among ``params`` that ``word`` (``--name`` or ``--name=value``) names, or None."""
    flag = word.split("=", 1)[0]
    for param in params:
        if param.param_type_name == "option" and flag in (*param.opts, *param.secondary_opts):
            return param
    return None


def _subcommand_at(group: Any, words: list[str]) -> int | None:
    """Where the group's subcommand is named in ``words``: its first word that is no option nor option value."""
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
        elif word == "--":
            return None
        elif _option_like(word):
            param = _named(group.params, word)
            skip = param is not None and _takes_value(param) and "=" not in word
        else:
            return i
    return None


def _context(cli: Any, args: list[str]) -> Any:
    """The context of the innermost command ``args`` name, parsed as far as they go (nothing is invoked)."""
    name, command, words, parent = "devctl", cli, list(args), None
    while True:
        if not isinstance(getattr(command, "commands", None), dict):  # a command, not a group
            return command.make_context(name, words, parent=parent, resilient_parsing=True)
        at = _subcommand_at(command, words)
        if at is None:
            return command.make_context(name, words, parent=parent, resilient_parsing=True)
        ctx = command.make_context(name, words[:at], parent=parent, resilient_parsing=True)
        sub = command.get_command(ctx, words[at])
        if sub is None:
            return ctx
        name, command, words, parent = words[at], sub, words[at + 1 :], ctx


def candidates(cli: Any, args: list[str], incomplete: str) -> list[Any]:
    """What completes ``incomplete`` after ``args``: click's completion items of the parameter or command it is
    for (each with ``value`` and ``help``), found through click's public methods only."""
    ctx = _context(cli, args)
    command = ctx.command
    if "=" in incomplete and _option_like(incomplete):
        param = _named(command.get_params(ctx), incomplete)
        if param is not None and _takes_value(param):
            return list(param.shell_complete(ctx, incomplete.split("=", 1)[1]))
    if _option_like(incomplete) and "--" not in args:
        return list(command.shell_complete(ctx, incomplete))
    if args and _option_like(args[-1]) and "=" not in args[-1]:
        param = _named(command.get_params(ctx), args[-1])
        if param is not None and _takes_value(param):
            return list(param.shell_complete(ctx, incomplete))
    for param in command.get_params(ctx):
        if param.param_type_name != "argument":
            continue
        source = ctx.get_parameter_source(param.name)
        if param.nargs == -1 or getattr(source, "name", None) != "COMMANDLINE":
            return list(param.shell_complete(ctx, incomplete))
    return list(command.shell_complete(ctx, incomplete))


def respond(command_for: Callable[[list[str]], Any]) -> int:
    """Answer the request of a completion script (``COMPLETE_VAR=complete_SHELL``): one candidate a line,
    refused or quoted as the module's docstring says; the exit code. ``command_for`` makes the click
    command for the words typed (only the modules they need)."""
    instruction = os.environ.get(COMPLETE_VAR, "")
    action, _, shell = instruction.partition("_")
    if action != "complete" or shell not in {s.value for s in Shell}:
        from devctl.base.escape import escape

        print(f"devctl: completion: unknown request {escape(instruction)!r}", file=sys.stderr)
        return 1
    args, incomplete = _request(shell)
    items = [item for item in candidates(command_for(args), args, incomplete) if offered(item.value)]
    if shell == Shell.fish.value and os.environ.get("_TYPER_COMPLETE_FISH_ACTION") == "is-args":
        return 0 if items else 1  # fish completes files when devctl has nothing
    if shell == Shell.bash.value:
        lines = [bash_word(item.value) for item in items]
    else:
        lines = [f"{item.value}\t{_help(item.help)}" if item.help else item.value for item in items]
    print("\n".join(lines))
    return 0


def completion(shell: Shell = typer.Argument(..., help="The shell to print the script for.")) -> None:
    """Print the completion script, e.g. `devctl completion bash > /etc/bash_completion.d/devctl`."""
    print(SCRIPTS[shell] % {"var": COMPLETE_VAR}, end="")


def register(app: typer.Typer) -> None:
    app.command("completion")(completion)
