"""The dead letters of a broker run: list them, replay them (``vf dead-letters``).

A worker that gives up on a message (its node raised ``retries + 1`` times, a
key could not be routed, a join half never met its counterpart) publishes it to
the run's dead-letter stream, one subject per node: the message's envelope as
a one-message record (so it can be sent again as it was) and, in the
``Vf-Dead-Letter`` header, what happened (node, replica, parent, trace id,
reason, error, traceback, attempts). The stream keeps them until they are
replayed or the stream is deleted; ``vf run --broker embedded`` copies them to
a JSON-lines file before its server stops.

Replaying publishes a letter's record again on the edge it came in by (the
partition its key belongs to, for a partitioned node) and only then deletes it
from the dead-letter stream: a replay interrupted halfway delivers a letter at
most twice, never zero times. Letters without a parent (join halves, letters
whose payload could not be kept) are listed, not replayed.
"""

from __future__ import annotations

import base64
import contextlib
import json
from dataclasses import dataclass
from typing import Any

from vfadapters.broker.client import api_request
from vfadapters.broker.record import unpack
from vfcore import FlowSpec, owner_of
from vfcore.runtime import BrokerTopology

__all__ = ["Letter", "read_letters", "replay_letters"]


@dataclass(frozen=True, slots=True)
class Letter:
    seq: int  # its sequence in the dead-letter stream
    subject: str
    entry: dict[str, Any]
    data: bytes

    @property
    def replayable(self) -> bool:
        return bool(self.entry.get("parent")) and self.entry.get("replayable", True) is not False


def _headers(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    text = base64.b64decode(raw).decode("utf-8", "replace")
    out: dict[str, str] = {}
    for line in text.split("\r\n")[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            out[key.strip()] = value.strip()
    return out


async def read_letters(nc: Any, topo: BrokerTopology, *, limit: int = 100_000) -> list[Letter]:
    """Every dead letter of the run, oldest first (at most ``limit``)."""
    stream = topo.dead_letters.config.name
    info = await api_request(nc, f"$JS.API.STREAM.INFO.{stream}")
    if info.get("error"):
        return []
    state = info.get("state", {})
    if not state.get("messages"):
        return []
    letters: list[Letter] = []
    seq = int(state.get("first_seq", 1))
    last = int(state.get("last_seq", 0))
    while seq <= last and len(letters) < limit:
        answer = await api_request(
            nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq, "next_by_subj": ">"}
        )
        if answer.get("error"):
            break
        message = answer["message"]
        got = int(message["seq"])
        headers = _headers(message.get("hdrs"))
        try:
            entry = json.loads(headers.get("Vf-Dead-Letter", "{}"))
        except ValueError:
            entry = {"error": "unreadable dead-letter header"}
        data = base64.b64decode(message.get("data") or b"")
        letters.append(Letter(got, message["subject"], entry, data))
        seq = got + 1
    return letters


async def replay_letters(
    nc: Any, spec: FlowSpec, topo: BrokerTopology, letters: list[Letter], run_key: bytes
) -> tuple[int, list[tuple[Letter, str]]]:
    """Send replayable letters back; (replayed, [(letter, why it was not)]).

    A letter's record is checked against the run key first (it was sealed for the
    letter's node when the letter was written) and sealed again for the edge it goes
    back on: only what verifies is ever sent, or decoded here.
    """
    from vfadapters.broker.sealing import (
        RecordOpener,
        RecordSealer,
        edge_domain,
        letter_domain,
        unsealed,
    )

    opener, sealer = RecordOpener(run_key), RecordSealer(run_key)
    js = nc.jetstream()
    stream = topo.dead_letters.config.name
    replayed = 0
    skipped: list[tuple[Letter, str]] = []
    await _reopen(js, spec, topo, {str(x.entry.get("node")) for x in letters if x.replayable})
    for letter in letters:
        entry = letter.entry
        if not letter.replayable:
            skipped.append((letter, "no parent edge to send it on (a join half, or not kept)"))
            continue
        node, parent = str(entry.get("node")), str(entry.get("parent"))
        try:
            edge = topo.edge(parent, node)
        except KeyError:
            skipped.append((letter, f"the flow has no edge {parent} → {node}"))
            continue
        why_not = opener.check(letter.data, letter_domain(node))
        if why_not is not None:
            skipped.append((letter, f"its record was refused, not replayed: {why_not}"))
            continue
        record = unsealed(letter.data)
        subject = edge.subjects[0]
        if edge.routing == "partitioned":
            try:
                trace_id, _, meta, _, _ = unpack(record)[0]
            except Exception as exc:  # truncated or foreign: the letter stays where it is
                skipped.append(
                    (letter, f"its record cannot be decoded ({type(exc).__name__}: {exc})")
                )
                continue
            subject = edge.subjects[
                owner_of(
                    spec.node(node), trace_id=trace_id, metadata=meta or {}, strategy=edge.strategy
                )
            ]
        try:
            await js.publish(
                subject,
                bytes(sealer.sealed_copy(record, edge_domain(parent, node))),
                timeout=10.0,
                headers={"Nats-Msg-Id": f"replay.{stream}.{letter.seq}"},
            )
        except Exception as exc:  # the letter stays where it is: nothing is lost
            import nats.js.errors

            if isinstance(exc, nats.js.errors.NoStreamResponseError):
                why = (
                    f"the run's stream for {parent} → {node} is gone (the run ended without "
                    "--keep-streams): run the flow again with this --run to recreate it"
                )
            else:
                why = f"publishing it failed: {type(exc).__name__}: {exc}"
            skipped.append((letter, why))
            continue
        await api_request(nc, f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": letter.seq})
        replayed += 1
    return replayed, skipped


async def _reopen(js: Any, spec: FlowSpec, topo: BrokerTopology, nodes: set[str]) -> None:
    """Forget that the nodes letters go back to, and every node below them, ended.

    A replica writes ``done`` once it finished; a child ends when its parents are
    done and its input is empty. After a run ended, the workers started again to
    take replayed letters would otherwise end at once below the letters' node (its
    ``done`` of the last life says there is nothing more), before the letters'
    outputs reach them. Without the marks each waits for its parents to end again.
    """
    from nats.js.errors import BucketNotFoundError, KeyNotFoundError

    children = spec.children()
    below: set[str] = set()
    todo = [n for n in nodes if n in spec]
    while todo:
        node = todo.pop()
        if node not in below:
            below.add(node)
            todo.extend(children.get(node, ()))
    if not below:
        return
    control = topo.control
    try:
        kv = await js.key_value(control.bucket)
    except BucketNotFoundError:
        return  # the run's control bucket is gone: no worker can be waiting on it
    for node in sorted(below):
        for replica in range(spec.node(node).replicas):
            with contextlib.suppress(KeyNotFoundError):
                await kv.delete(control.done_key(node, replica))
