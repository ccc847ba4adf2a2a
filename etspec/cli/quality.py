"""``etspec quality``: how much of a reference artifact a candidate (a quantized export of
the same model) keeps."""

from __future__ import annotations

import json
from pathlib import Path

import click

from etspec.cli.app import force_option, main, user_errors, verbose_option
from etspec.cli.runner_options import no_weight_cache_option


@main.command()
@click.argument("reference", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--new-tokens", default=96, show_default=True, help="Tokens per agreement prompt.")
@click.option(
    "--json", "json_out", type=click.Path(path_type=Path), default=None,
    help="Also write the report as JSON to this file.",
)  # fmt: skip
@force_option
@no_weight_cache_option
@verbose_option
@user_errors
def quality(
    reference: Path,
    candidate: Path,
    new_tokens: int,
    json_out: Path | None,
    force: bool,
    no_weight_cache: bool,
) -> None:
    """How much of REFERENCE (e.g. the fp32 .pte) CANDIDATE (e.g. a quantized .pte of the
    same model) keeps: teacher-forced top-1 agreement, held-out perplexity, a copy test."""
    from etspec.files import check_output
    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec
    from etspec.tools.quality import compare

    if json_out is not None:  # before the run, not after it
        check_output(json_out, force, "--json", inputs=(reference, candidate))

    cache = False if no_weight_cache else None
    runners = [load_runners(RunnerSpec(p, weight_cache=cache))[0] for p in (reference, candidate)]
    report = compare(runners[0], runners[1], (str(reference), str(candidate)), new_tokens)
    click.echo(
        f"top-1 agreement {report.agreement:.1%} over {report.positions} teacher-forced "
        f"positions (per prompt: {', '.join(f'{a:.0%}' for a in report.agreement_per_prompt)})"
    )
    click.echo(
        f"held-out perplexity {report.perplexity_reference:.2f} -> "
        f"{report.perplexity_candidate:.2f} ({report.perplexity_ratio - 1:+.1%})"
    )
    for who, ok in (("reference", report.copy_reference), ("candidate", report.copy_candidate)):
        matched = report.copy_matched_tokens[who]
        verdict = "passes" if ok else f"fails after {matched} of {report.copy_needed_tokens} tokens"
        click.echo(f"copy test, {who}: {verdict}")
    if json_out is not None:
        from etspec.files import write_output

        write_output(
            json_out, (json.dumps(report.to_dict(), indent=1) + "\n").encode(), "--json", force
        )
        click.echo(f"wrote {json_out}")
