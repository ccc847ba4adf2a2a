"""The ``etspec`` command group and what every command shares: one-line user errors,
options with other runtimes' aliases, the export and memory options."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from etspec import logs
from etspec.contract import BACKENDS, DEPLOYMENT_DTYPE, DTYPES
from etspec.errors import EtspecError

F = TypeVar("F", bound=Callable[..., Any])


def one_line(text: str) -> str:
    """A message quoting user input (a newline in ``--prompt-ids``) still prints as one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def user_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EtspecError as e:
            click.echo(f"error: {one_line(str(e))}", err=True)
            sys.exit(1)
        except MemoryError:
            # A size the user chose (a context, a tree, a batch of prompts) that this
            # machine cannot hold: one line, not the allocator's traceback.
            click.echo(
                "error: out of memory; use a smaller --max-seq, tree or model, or free memory",
                err=True,
            )
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


class AliasedOption(click.Option):
    """An option that also answers to the names users bring from other runtimes
    (``contract.OPTION_ALIASES``); help shows our name and lists the aliases after the text."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = aliases

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = [o for o in self.opts if o not in self.aliases]
        opts, self.opts = self.opts, shown
        try:
            record = super().get_help_record(ctx)
        finally:
            self.opts = opts
        if record is None or not self.aliases:
            return record
        return record[0], f"{record[1]}  [aliases: {', '.join(self.aliases)}]".lstrip()


def option(*decls: str, **kwargs: Any) -> Callable[[F], F]:
    """``click.option`` plus the aliases ``contract.OPTION_ALIASES`` lists for its name."""
    from etspec.contract import alias_names

    name = next(d for d in decls if d.startswith("--"))
    aliases = alias_names(name)
    flags = [d for d in decls if d.startswith("-")]
    dest = [d for d in decls if not d.startswith("-")] or [name.lstrip("-").replace("-", "_")]
    return click.option(*flags, *aliases, *dest, cls=AliasedOption, aliases=aliases, **kwargs)


class OneLineErrors(click.Group):
    """Usage errors (bad option values, unknown options) print one ``error:`` line with the
    fix, like every other user error, instead of click's three-line usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("standalone_mode", None)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
            _flush_stdout()  # a full disk shows here, not in the interpreter's exit
        except click.exceptions.NoArgsIsHelpError as e:
            # Bare `etspec`: one line naming the commands, not the whole help as an error.
            from etspec.contract import message

            # `etspec export` alone names export's own subcommands.
            ctx = e.ctx
            group = ctx.command if ctx is not None else self
            assert isinstance(group, click.Group)
            path = ctx.command_path if ctx is not None else "etspec"
            commands = ", ".join(sorted(group.commands))
            click.echo(f"error: {message('no_command', commands=commands, path=path)}", err=True)
            sys.exit(2)
        except click.UsageError as e:
            where = f"; see `{e.ctx.command_path} --help`" if e.ctx is not None else ""
            click.echo(f"error: {one_line(e.format_message().rstrip('.'))}{where}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except OSError as e:
            if not _stdout_failed(e):
                raise
            from etspec.contract import message

            click.echo(f"error: {message('stdout_failed')}", err=True)
            sys.exit(1)
        if isinstance(rv, int) and rv:  # click.exceptions.Exit's code, returned
            sys.exit(rv)
        return rv


# A write to stdout fails with these when its reader went away or its disk is full.
_STDOUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF}


def _flush_stdout() -> None:
    file = sys.stdout  # named ``file`` as in click.echo: ``_stdout_failed`` reads it
    if file is not None:
        file.flush()


def _stdout_failed(e: OSError) -> bool:
    """Whether ``e`` is stdout failing: raised writing ``file`` (click.echo's and
    ``_flush_stdout``'s) when that is stdout. A failed write drops what it held, so stdout
    is then pointed at /dev/null: the interpreter's own flush at exit adds no traceback
    under the one-line error (as the C++ runner's ``stdout_failed``)."""
    if e.errno not in _STDOUT_ERRNOS or sys.stdout is None:
        return False
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    file = tb.tb_frame.f_locals.get("file") if tb is not None else None
    if file is None or file not in (sys.stdout, getattr(sys.stdout, "buffer", None)):
        return False
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return True


@click.group(cls=OneLineErrors)
@click.version_option(package_name="etspec")
def main() -> None:
    """Lossless speculative decoding on ExecuTorch: export a .pte pair, run it, measure it."""
    # Library warnings and ExecuTorch's log lines say nothing about the user's command:
    # they go to a log that --verbose prints.
    logs.quiet_process()


backend_option = click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="xnnpack",
    show_default=True,
    help="ExecuTorch backend: xnnpack; portable (ExecuTorch's own kernels, fp32); openvino "
    "(Intel CPUs, fp32; pip install 'etspec[openvino]').",
)
RECIPES_HELP = (
    "fp32; 8da8w-e4 (int8 linears and lm_head, int4 embedding); 8da8w (int8 everywhere); "
    "8da4w-mixed (int4 decoder linears, int8 lm_head and embedding); 8da4w-mlp (int4 MLPs, "
    "int8 attention and lm_head, int4 embedding); 8da4w (int4 linears and lm_head, fp32 "
    "embedding). README 'Gemma 3 270M' has what each keeps of the model."
)
dtype_option = click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=None,
    help=f"Weight recipe (default: {DEPLOYMENT_DTYPE} on xnnpack, fp32 on the others): "
    + RECIPES_HELP,
)
draft_dtype_option = click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default="fp32",
    show_default=True,
    help="Weight recipe of the draft: " + RECIPES_HELP,
)


def default_dtype(dtype: str | None, backend: str) -> str:
    """The backend's deployment recipe unless the user chose one."""
    from etspec.export.backends import backend as backend_entry

    return dtype if dtype is not None else backend_entry(backend).default_dtype


force_option = click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
verbose_option = click.option(
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=lambda _ctx, _param, on: logs.show(on),
    help="Also print what libraries log (ExecuTorch's native log lines, torch warnings).",
)
