"""`airwave approve`, `airwave reject`, `airwave approvals show`: answer an approval gate.

The answer is one conditional transaction on the interrupt row (`resources/stores/approvals.py`):
of any number of concurrent answers exactly one wins; the others exit with `EXIT_CONFLICT` and
say who answered first and when. Who answers is the principal of the OS user running this process
(mapped by the permissions policy, docs/security.md) — never an argument — and it must hold
`approvals:resolve:<job>`, else the command exits 4 having changed nothing. An approval resumes
the same run tree (every completed step replayed, the planner never called again).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from airwave_dagster.cli import console, environment, starts
from airwave_dagster.domain.permissions import approval_permission, run_permission
from airwave_dagster.permissions import PermissionDenied, cli_require
from airwave_dagster.run_tags import AWAITING_APPROVAL_TAG, STATUS_TAG

if TYPE_CHECKING:
    from airwave_dagster.cli.webserver import Webserver
    from resources.stores.approvals import Interrupt

EXIT_NOT_FOUND = 2
EXIT_CONFLICT = 4
"""A lost race, an answer to an interrupt already closed (answered, canceled, expired), or an
answer the permissions policy refuses."""
_RUN_END_SECONDS = 120.0


def find_interrupt(instance: Any, run_id: str) -> Interrupt | None:
    """The interrupt of `run_id`'s run tree (any run of the tree may be named)."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return None
    root = run.root_run_id or run.run_id
    return environment.open_project_stores().approvals.find(root)


def interrupt_job(instance: Any, interrupt: Interrupt) -> str:
    """The job whose gate the interrupt is (its run's job: `ai_lineup`, `rollback_lineup`)."""
    run = instance.get_run_by_id(interrupt.run_id) or instance.get_run_by_id(interrupt.root_run_id)
    return run.job_name if run is not None else ""


def _canceled_meanwhile(instance: Any, interrupt: Interrupt, *, by: str) -> bool:
    """Whether the stopped run was canceled behind the interrupt's back; if so, close it.

    `airwave runs cancel` closes the interrupt itself; the UI's terminate (force) only marks
    the run CANCELED, and an answer must not restart what someone stopped.
    """
    if not interrupt.open:
        return False
    run = instance.get_run_by_id(interrupt.run_id)
    if run is None or run.status.value != "CANCELED":
        return False
    stores = environment.open_project_stores()
    won, closed = stores.approvals.resolve(
        interrupt.id, "canceled", resolved_by=by, reason="the run was canceled"
    )
    if won:
        instance.add_run_tags(
            interrupt.run_id, {AWAITING_APPROVAL_TAG: closed.describe(), STATUS_TAG: closed.status}
        )
    return True


def close_open_interrupt(instance: Any, run_id: str, reason: str, *, by: str) -> Interrupt | None:
    """Cancel's first step: close the run tree's open interrupt so nobody can answer it later.

    Args:
        by: The principal canceling (recorded as who closed the interrupt).

    Returns:
        The interrupt as closed by this call, or None when there was no open one.
    """
    interrupt = find_interrupt(instance, run_id)
    if interrupt is None or not interrupt.open:
        return None
    stores = environment.open_project_stores()
    won, closed = stores.approvals.resolve(interrupt.id, "canceled", resolved_by=by, reason=reason)
    if won:
        instance.add_run_tags(
            interrupt.run_id, {AWAITING_APPROVAL_TAG: closed.describe(), STATUS_TAG: closed.status}
        )
    return closed if won else None


def entries_table(title: str, entries: list[dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("number", "previous", "channel", "package"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(
            "" if e.get("number") is None else str(e["number"]),
            "" if e.get("previous_number") is None else str(e["previous_number"]),
            e["name"],
            e.get("package") or "",
        )
    return table


def print_interrupt(interrupt: Interrupt) -> None:
    """The interrupt's state, the diff it was opened on and the cost estimate, as tables."""
    out = console.stdout
    out.print(
        f"approval {interrupt.gate_id} of run tree {interrupt.root_run_id}: "
        f"{interrupt.describe()}" + (f" — {interrupt.reason}" if interrupt.reason else ""),
        highlight=False,
    )
    if interrupt.expires_at is not None:
        out.print(f"  expires {interrupt.expires_at:%Y-%m-%d %H:%M:%S %Z}", highlight=False)
    if interrupt.continuation_run_id:
        out.print(f"  continued as run {interrupt.continuation_run_id}", highlight=False)
    diff = interrupt.payload.get("diff", {})
    for kind, title in (
        ("removed", "removed"),
        ("created", "created"),
        ("renumbered", "renumbered"),
        ("unchanged", "unchanged"),
        ("kept", "kept as they are (beyond the limit)"),
    ):
        entries = diff.get(kind, [])
        if entries:
            out.print(entries_table(f"{title} ({len(entries)})", entries))
    untouched = diff.get("untouched", [])
    if untouched:
        table = Table(title=f"untouched manual/preset ({len(untouched)})", title_justify="left")
        for column in ("number", "channel", "package", "origin"):
            table.add_column(column, overflow="fold")
        for c in untouched:
            table.add_row(str(c["number"]), c["name"], c.get("package") or "", c["origin"])
        out.print(table)
    for label, key in (("removed", "removed_packages"), ("created", "created_packages")):
        names = diff.get(key, [])
        out.print(f"AI packages {label}: {', '.join(names) or '—'}", highlight=False)
    estimate = interrupt.payload.get("estimate", {})
    if estimate:
        usd = estimate.get("estimated_usd")
        budget = estimate.get("budget_usd")
        out.print(
            f"estimated build cost: {'unpriced' if usd is None else f'${usd:.4f}'} "
            f"({estimate['channels']} channel(s) x {estimate['calls_per_build']} call(s), "
            f"{estimate['worker_model']}); planner spent ${estimate['planner_spent_usd']:.4f}; "
            f"budget {'none' if budget is None else f'${budget:.2f}'}",
            highlight=False,
        )


def answer(
    run_id: str,
    status: str,
    *,
    reason: str | None,
    wait: bool,
    as_json: bool,
    server: Webserver | None = None,
) -> int:
    """Approve or reject the run tree's interrupt; an approval resumes the tree.

    Returns:
        The exit code: 0, `EXIT_NOT_FOUND` or `EXIT_CONFLICT` (also: permission denied).
    """
    from airwave_dagster.cli import launcher
    from airwave_dagster.suspension import answered, end_suspended

    instance = console.instance()
    interrupt = find_interrupt(instance, run_id)
    if interrupt is None:
        console.error(f"run {run_id} has no approval to answer")
        return EXIT_NOT_FOUND
    job = interrupt_job(instance, interrupt)
    # An approval continues the run tree, which is a resume: both are checked before the answer
    # is written, so a refusal leaves the interrupt open and unchanged.
    needed = [approval_permission(job)]
    if status == "approve":
        needed.append(run_permission("resume", job))
    try:
        identity = ""
        for permission in needed:
            identity = cli_require(permission)
    except PermissionDenied as error:
        console.error(str(error))
        return EXIT_CONFLICT
    stores = environment.open_project_stores()
    if _canceled_meanwhile(instance, interrupt, by=identity):
        message = f"conflict: run {interrupt.run_id} was canceled; nothing is left to answer"
        if as_json:
            sys.stdout.write(json.dumps({"run_id": run_id, "conflict": "canceled"}) + "\n")
        console.error(message)
        return EXIT_CONFLICT
    won, row = stores.approvals.resolve(
        interrupt.id,
        "approved" if status == "approve" else "rejected",
        resolved_by=identity,
        reason=reason,
    )
    if not won:
        if row.status == "expired":
            end_suspended(instance, row.run_id, approved=False, message=row.describe())
        message = f"conflict: already {row.describe()}"
        if as_json:
            sys.stdout.write(json.dumps({"run_id": run_id, "conflict": row.describe()}) + "\n")
        console.error(message)
        return EXIT_CONFLICT
    # The gate records its question a moment before its run is SUSPENDED: the answer ends or
    # resumes the run once it is.
    answered(instance, row, _RUN_END_SECONDS)
    if row.status == "rejected":
        console.stdout.print(
            f"{row.describe()}: run tree {row.root_run_id} ends here; nothing was written",
            highlight=False,
        )
        if as_json:
            sys.stdout.write(json.dumps({"run_id": run_id, "status": row.status}) + "\n")
        return 0
    with console.target_for(server) as target:
        try:
            continuation = starts.resume(target, row.run_id)
        except starts.LaunchRefused as error:
            console.error(
                f"{row.describe()}, but the run could not be continued: {error}. "
                f"`airwave runs resume {row.run_id}` retries it (the approval stands)."
            )
            return 1
        stores.approvals.record_continuation(row.id, continuation.run_id)
        end_suspended(
            instance,
            row.run_id,
            approved=True,
            message=f"{row.describe()}; continued as run {continuation.run_id}",
        )
        console.stdout.print(
            f"{row.describe()}; continuing as run {continuation.run_id}", highlight=False
        )
        console.show_run_page(continuation.run_id, target)
        if not wait:
            if as_json:
                sys.stdout.write(
                    json.dumps({"run_id": continuation.run_id, "status": "approved"}) + "\n"
                )
            return 0
    final = launcher.follow(instance, continuation.run_id)
    report = environment.open_project_stores().ai.traces([final.run_id])
    markdown = next((r["output"] for r in report if r["phase"] == "report"), None)
    # A lineup rollback's continuation has no lineup report: what it removed and restored.
    rollback = None if markdown is not None else rollback_result(instance, [final.run_id])
    if as_json:
        outcome = {"run_id": final.run_id, "status": final.status.value, "report": markdown}
        if rollback is not None:
            outcome["rollback"] = rollback
        sys.stdout.write(json.dumps(outcome) + "\n")
    elif markdown is not None:
        sys.stdout.write(markdown.get("markdown", ""))
    elif rollback is not None:
        print_rollback(rollback)
    console.stdout.print(f"run {final.run_id}: {final.status.value}", highlight=False)
    return 0 if final.status.value == "SUCCESS" else 1


@click.command("approve")
@click.argument("run_id")
@click.option("--wait", is_flag=True, help="Follow the continued run and print its report.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def approve_command(run_id: str, wait: bool, as_json: bool) -> None:
    """Approve the lineup a run stopped at, and continue its run tree (exit 4: already answered)."""
    server = console.prepare_to_start()  # the continuation may be launched from here
    run_id = console.run_id(run_id)
    sys.exit(answer(run_id, "approve", reason=None, wait=wait, as_json=as_json, server=server))


@click.command("reject")
@click.argument("run_id")
@click.option("--reason", required=True, help="Why; recorded on the interrupt.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def reject_command(run_id: str, reason: str, as_json: bool) -> None:
    """Reject the lineup a run stopped at: the run tree ends, nothing is written (exit 4: lost)."""
    console.prepare()
    run_id = console.run_id(run_id)
    sys.exit(answer(run_id, "reject", reason=reason, wait=False, as_json=as_json))


@click.group("approvals")
def approvals_group() -> None:
    """Inspect approval gates."""


@approvals_group.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the interrupt as JSON.")
def approvals_show(run_id: str, as_json: bool) -> None:
    """The diff and cost a run stopped at; exit 0 while open, 4 once answered, 2 if none."""
    console.prepare()
    run_id = console.run_id(run_id)
    interrupt = find_interrupt(console.instance(), run_id)
    if interrupt is None:
        console.error(f"run {run_id} has no approval")
        sys.exit(EXIT_NOT_FOUND)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "root_run_id": interrupt.root_run_id,
                    "gate_id": interrupt.gate_id,
                    "status": interrupt.status,
                    "resolved_by": interrupt.resolved_by,
                    "payload": interrupt.payload,
                }
            )
            + "\n"
        )
    else:
        print_interrupt(interrupt)
    sys.exit(0 if interrupt.open else EXIT_CONFLICT)


ROLLBACK_APPLY_OP = "apply_rollback"
"""The rollback job's step whose output metadata says what was removed and restored."""


def rollback_result(instance: Any, run_ids: list[str]) -> dict[str, Any] | None:
    """The `apply_rollback` step's result (its output metadata) in a run tree, if it ran."""
    import dagster as dg

    found: dict[str, Any] | None = None
    for run_id in run_ids:
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_OUTPUT):
            event = record.dagster_event
            if event is None or event.step_key != ROLLBACK_APPLY_OP:
                continue
            entry = event.step_output_data.metadata.get("result")
            if entry is not None:
                found = dict(entry.value)
    return found


def print_rollback(result: dict[str, Any]) -> None:
    """What a rollback removed and restored, as the approval tables show channels."""
    out = console.stdout
    out.print(result.get("summary", ""), highlight=False)
    for key, title in (("removed", "removed"), ("restored", "restored")):
        entries = result.get(key, [])
        if entries:
            out.print(entries_table(f"{title} ({len(entries)})", entries))
    for label, key in (("removed", "removed_packages"), ("restored", "restored_packages")):
        out.print(f"AI packages {label}: {', '.join(result.get(key, [])) or '—'}", highlight=False)
