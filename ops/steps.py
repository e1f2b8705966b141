"""Dagster-side helpers of the durability layer shared by every job that fans out."""

import dagster as dg

from resources.stores.claims import Claimant


def step_key(context: dg.OpExecutionContext) -> str:
    """The step key as Dagster writes it: `build_channel[ch_101]` for a mapped step."""
    mapping_key = context.get_mapping_key()
    name = context.op_handle.name
    return f"{name}[{mapping_key}]" if mapping_key else name


def claimant(context: dg.OpExecutionContext) -> Claimant:
    """This attempt of this step of this run, as the holder of a channel claim."""
    return Claimant(
        run_id=context.run_id, step_key=step_key(context), attempt=context.retry_number + 1
    )
