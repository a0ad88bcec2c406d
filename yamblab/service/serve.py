"""``yamblab serve``: the advice API and the browser client (FastAPI; OpenAPI docs at /docs).

Endpoints (JSON; every request names its rule variant, defaulting to the server's first):

=================================  ==========================================================
``GET  /api/info``                 variants served (with their optimal expected score), agents,
                                   Yamb oracles, the target-score table
``POST /api/yahtzee/advice``       every legal keep and box of a position ranked by exact
                                   expected final score, with the points each gives away
``POST /api/yahtzee/grade``        a recorded game (decisions with their dice): loss per
                                   decision, in total and by decision type
``POST /api/yahtzee/replay``       a browser game: seeded dice plus the moves so far, graded
``POST /api/yahtzee/agent/move``   a named agent's (or the checkpoint's) move in a position,
                                   with its search values
``POST /api/yahtzee/agent/game``   a whole agent game on the same seeded dice (to watch or race)
``POST /api/yahtzee/target``       every action ranked by P(final ≥ target) (``--target``)
``POST /api/yamb/advice``          the same for a Yamb single-column position (exact oracle)
``POST /api/yamb/replay``          a Yamb single-column game in the browser
=================================  ==========================================================

A user's mistake (impossible dice or card, an unknown variant, an illegal move) and a malformed
request (a body that is not JSON, a missing or unknown field, a wrong type, a value out of range)
are answered with 400 and ``{"detail": "<what is wrong>"}``, one line naming the field
(``rolls_left: Input should be less than or equal to 2``); tables load once, at start-up, and
are shared read-only, so one bad request never disturbs another.
Sources: timpalpant/yahtzee (a JSON advice endpoint shared by a browser client and a robot),
the Best Values post (a page that grades every hold and box a person picks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from yamblab.errors import YamblabError
from yamblab.service.service import MAX_SEED, Service

STATIC = Path(__file__).with_name("static")

Card = Union[dict[str, int], str, None]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hold(_Model):
    """Keep the dice at these positions (1..5) and reroll the rest; ``[]`` rerolls all."""

    hold: list[int] = Field(max_length=6)


class Box(_Model):
    """Score the dice in a box, by name (``full_house``, ``fh``, ``Full House`` …)."""

    box: str = Field(max_length=40)


class Row(_Model):
    """Score the dice in a Yamb row by name (``null``: the next row of a down/up column)."""

    row: Optional[str] = Field(..., max_length=40)


Move = Union[Hold, Box]


class Position(_Model):
    """A Yahtzee position: the card so far, the dice in their order, the rolls left."""

    rules: Optional[str] = Field(default=None, max_length=80, description="rule variant, e.g. 'forced' or 'free,no-yahtzee-bonus'")
    card: Card = Field(default=None, description="{box name: points} or 'ones=3,full_house=25'")
    yahtzee_bonuses: Optional[int] = Field(default=None, ge=0, le=12)
    dice: list[int] = Field(min_length=1, max_length=10, description="the five faces, in order")
    rolls_left: int = Field(ge=0, le=2, description="2 after the first roll, 0 after the last")


class AdviceRequest(Position):
    top: Optional[int] = Field(default=None, ge=1, le=500, description="return only the best N actions")


class TargetRequest(AdviceRequest):
    target: int = Field(ge=0, le=2000, description="the final score to reach")


class AgentMoveRequest(Position):
    agent: str = Field(max_length=40, description="oracle, greedy, random or checkpoint")


class Decision(_Model):
    dice: list[int] = Field(min_length=1, max_length=10)
    rolls_left: int
    move: Move


class GradeRequest(_Model):
    rules: Optional[str] = Field(default=None, max_length=80)
    card: Card = Field(default=None, description="the card the game starts from (default: empty)")
    yahtzee_bonuses: Optional[int] = Field(default=None, ge=0, le=12)
    decisions: list[Decision] = Field(max_length=100)


class ReplayRequest(_Model):
    rules: Optional[str] = Field(default=None, max_length=80)
    seed: int = Field(ge=0, le=MAX_SEED)
    game: int = Field(default=0, ge=0, le=2**32)
    moves: list[Move] = Field(default_factory=list, max_length=100)
    advice: bool = False


class AgentGameRequest(_Model):
    rules: Optional[str] = Field(default=None, max_length=80)
    seed: int = Field(ge=0, le=MAX_SEED)
    game: int = Field(default=0, ge=0, le=2**32)
    agent: str = Field(max_length=40)


class YambAdviceRequest(_Model):
    preset: str = Field(default="croatian", max_length=40)
    column: Literal["down", "up", "free"] = "down"
    scores: Optional[dict[str, int]] = Field(default=None, description="{row name: points} of filled rows")
    dice: list[int] = Field(min_length=1, max_length=10)
    roll: int = Field(ge=1, le=10, description="roll number this turn, 1-based")


class YambReplayRequest(_Model):
    preset: str = Field(default="croatian", max_length=40)
    column: Literal["down", "up", "free"] = "down"
    seed: int = Field(ge=0, le=MAX_SEED)
    game: int = Field(default=0, ge=0, le=2**32)
    moves: list[Union[Hold, Row]] = Field(default_factory=list, max_length=100)
    advice: bool = False


def _dump(m) -> dict:
    return m.model_dump()


class Problem(BaseModel):
    """What every 400 answers: one line naming what is wrong (the field, for a malformed request)."""

    detail: str


#: how each member of a union of moves is written, for a move none of them accepts
_SHAPES = {"Hold": '{"hold": [die positions 1..5]}', "Box": '{"box": "box name"}',
           "Row": '{"row": "row name"} (null: the next row)'}


def _where(loc) -> tuple[str, str | None, str]:
    """(the field as a client writes it: ``dice[0]``, ``decisions[2].move``, up to the union
    member the error is about; that member, if any; the whole field, ``moves[0].hold``)."""
    from yamblab.training.configio import _MEMBER

    field, member, at = "", None, ""
    for p in loc[1:] if loc and loc[0] in ("body", "query", "path", "header", "cookie") else loc:
        if isinstance(p, int):
            field += f"[{p}]"
        elif p in _SHAPES and member is None:
            member, at = p, field
        elif not _MEMBER.match(p):
            field += f".{p}" if field else p
    return (at if member else field), member, field


def validation_message(errors: list[dict], model: type[BaseModel] | None = None) -> str:
    """One line for pydantic's errors of a request: each field with what is wrong with it
    (``rolls_left: Input should be less than or equal to 2``), an unknown field with the nearest
    known one, a move that is none of the moves with the moves' forms, a body that is not a
    JSON object said so."""
    from yamblab.training.configio import dotted_keys, nearest_key

    problems: dict[str, list[str]] = {}
    members: dict[str, dict[str, list[dict]]] = {}       # field -> union member -> its errors
    for err in errors:
        field, member, _ = _where(err["loc"])
        if member is not None:
            members.setdefault(field, {}).setdefault(member, []).append(err)
            continue
        kind, msg = err["type"], " ".join(str(err["msg"]).split())
        if kind == "json_invalid":
            at = err["loc"][-1] if isinstance(err["loc"][-1], int) else None
            why = (err.get("ctx") or {}).get("error")
            field, msg = "", "the body is not valid JSON" + (f" ({why}" + (f" at character {at})" if at is not None
                                                                           else ")") if why else "")
        elif not field and kind == "missing":
            msg = "no body: send the request's fields as a JSON object"
        elif not field and kind in ("model_attributes_type", "dict_type", "model_type"):
            msg = "the body must be a JSON object of the request's fields (Content-Type: application/json)"
        elif kind == "extra_forbidden":
            near = nearest_key(field, dotted_keys(model)) if model is not None and "[" not in field else None
            msg = "unknown field" + (f" (did you mean {near}?)" if near else "")
        said = problems.setdefault(field, [])
        if msg not in said:
            said.append(msg)
    for field, by_member in members.items():
        # the member the client meant (its fields were all given and known), else the forms
        meant = [errs for errs in by_member.values() if not any(e["type"] in ("missing", "extra_forbidden")
                                                                 for e in errs)]
        if len(meant) == 1:
            for e in meant[0]:
                f = _where(e["loc"])[2]
                problems.setdefault(f, []).append(" ".join(str(e["msg"]).split()))
        else:
            problems.setdefault(field, []).append(
                "a move is " + " or ".join(_SHAPES[m] for m in by_member))
    return "; ".join((f"{field}: " if field else "") + msgs[0]
                     + "".join(f", or {m.removeprefix('Input should be ')}" for m in msgs[1:])
                     for field, msgs in problems.items())


def _answer_400(app) -> None:
    """Every user mistake and malformed request answers 400 with one line (FastAPI's own 422
    left out of the handlers and the schema)."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    @app.exception_handler(YamblabError)
    async def _user_error(request: Request, exc: YamblabError):
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(RequestValidationError)
    async def _malformed(request: Request, exc: RequestValidationError):
        """A malformed request (not JSON, a missing, unknown or mistyped field, a value out of
        range) is a user's mistake like any other: 400 and one line naming the field."""
        field = getattr(request.scope.get("route"), "body_field", None)
        model = getattr(getattr(field, "field_info", None), "annotation", None)
        model = model if isinstance(model, type) and issubclass(model, BaseModel) else None
        return JSONResponse(status_code=400, content={"detail": validation_message(list(exc.errors()), model)})

    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's schema, without the 422 it documents by default (this app answers 400)."""
        if app.openapi_schema is None:
            schema = default_openapi()
            for ops in schema.get("paths", {}).values():
                for op in ops.values():
                    op.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
        return app.openapi_schema

    app.openapi = openapi


def create_app(service: Service):
    """The FastAPI app over a :class:`~yamblab.service.service.Service` (its tables already loaded)."""
    from fastapi import FastAPI
    from fastapi.responses import RedirectResponse
    from fastapi.staticfiles import StaticFiles

    app = FastAPI(title="yamblab", description=__doc__.split("\n\n")[0], version="0.1.0",
                  responses={400: {"model": Problem, "description": "A user's mistake or a malformed request, "
                                                                   "named in one line"}})
    _answer_400(app)

    @app.get("/api/info")
    def info() -> dict[str, Any]:
        """Variants served, agents, Yamb oracles, target table."""
        return service.info()

    @app.post("/api/yahtzee/advice")
    def yahtzee_advice(req: AdviceRequest) -> dict[str, Any]:
        """Every legal keep and box ranked by exact expected final score."""
        return service.advice(req.rules, req.card, req.dice, req.rolls_left, req.yahtzee_bonuses, req.top)

    @app.post("/api/yahtzee/grade")
    def yahtzee_grade(req: GradeRequest) -> dict[str, Any]:
        """Grade a recorded game: points given away per decision, in total and by type."""
        decisions = [{"dice": d.dice, "rolls_left": d.rolls_left, "move": _dump(d.move)} for d in req.decisions]
        return service.grade_decisions(req.rules, decisions, req.card, req.yahtzee_bonuses)

    @app.post("/api/yahtzee/replay")
    def yahtzee_replay(req: ReplayRequest) -> dict[str, Any]:
        """A seeded game with the moves so far, each graded; the position now."""
        return service.replay(req.rules, req.seed, [_dump(m) for m in req.moves], req.game, req.advice)

    @app.post("/api/yahtzee/agent/move")
    def agent_move(req: AgentMoveRequest) -> dict[str, Any]:
        """A named agent's move in a position, graded, with its search values."""
        return service.agent_move(req.rules, req.agent, req.card, req.dice, req.rolls_left, req.yahtzee_bonuses)

    @app.post("/api/yahtzee/agent/game")
    def agent_game(req: AgentGameRequest) -> dict[str, Any]:
        """A whole game of a named agent on the seeded dice, graded move by move."""
        return service.agent_game(req.rules, req.agent, req.seed, req.game)

    @app.post("/api/yahtzee/target")
    def yahtzee_target(req: TargetRequest) -> dict[str, Any]:
        """Every legal action ranked by P(final score ≥ target) under target-maximising play."""
        return service.target_advice(req.rules, req.card, req.dice, req.rolls_left, req.target,
                                     req.yahtzee_bonuses, req.top)

    @app.post("/api/yamb/advice")
    def yamb_advice(req: YambAdviceRequest) -> dict[str, Any]:
        """Every action of a Yamb single-column position ranked by exact expected final score."""
        return service.yamb_advice(req.preset, req.column, req.scores, req.dice, req.roll)

    @app.post("/api/yamb/replay")
    def yamb_replay(req: YambReplayRequest) -> dict[str, Any]:
        """A seeded Yamb single-column game with the moves so far, each graded."""
        return service.yamb_replay(req.preset, req.column, req.seed, [_dump(m) for m in req.moves],
                                   req.game, req.advice)

    @app.get("/", include_in_schema=False)
    def index():
        return RedirectResponse("/static/index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def check_address(host: str, port: int) -> None:
    """Refuse an address the server could not listen on, before any table is loaded.

    Raises:
        YamblabError: a host that is neither an IP address nor a host name, a port outside
            1..65535, or an address this machine cannot listen on (taken, privileged, not its own).
    """
    import ipaddress
    import re

    if not 1 <= int(port) <= 65535:
        raise YamblabError(f"--port {port} is not a port number 1..65535")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        label = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
        if len(host) > 253 or not re.fullmatch(rf"{label}(\.{label})*\.?", host):
            raise YamblabError(f"--host {host!r} is not an IP address or a host name")
    _listen(host, port).close()


def _listen(host: str, port: int):
    """A socket listening on ``host:port`` (as uvicorn would open it), or one line saying why not.

    Raises:
        YamblabError: the port is taken, a privileged port, or the host is not this machine's.
    """
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise YamblabError(f"--host {host!r}: no such host ({exc.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = {errno.EADDRINUSE: f"port {port} is already in use there; choose another --port",
               errno.EACCES: f"port {port} needs privileges; choose one above 1023",
               errno.EADDRNOTAVAIL: "it is not an address of this machine"}.get(exc.errno, exc.strerror or str(exc))
        raise YamblabError(f"cannot serve on {host}:{port}: {why}") from None
    return sock


def run_server(service: Service, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``service`` with uvicorn until interrupted; the URL is printed once its socket
    listens (a taken port is one line, not a URL then uvicorn's error)."""
    import uvicorn

    sock = _listen(host, port)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"yamblab serve: open http://{shown}:{port}/  (API docs: http://{shown}:{port}/docs)", flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning"))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:       # Ctrl-C: a clean stop, as uvicorn.run makes it
        pass
