"""The memory inspector: a FastAPI app over one memory directory (``create_app``).

Pages are rendered on the server (Jinja2 templates under ``templates/``, one stylesheet under
``static/``, no script from elsewhere). Lists and pictures are read through ``MemoryReader``
(read-only SQLite); semantic search, questions and the operator's writes (name, merge, forget)
go through a ``Backend`` (backends.py): the store the inspector opens itself, or with
``inspect --ros`` the running stack's services. ``read_only`` removes every write; ``token``
(set when binding beyond loopback) is required on every request; each write is appended to
the audit log.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import hmac
import logging
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional
from urllib.parse import quote

import cv2
from fastapi import FastAPI, Form, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from ..agent.query_agent import PLANNERS
from ..store.identities import UNDOABLE_CHANGES
from .audit import AuditLog
from .backends import Backend, BackendError
from .map_view import MapView, person_colour
from .reader import PAGE_SIZE, MemoryReader

log = logging.getLogger(__name__)
TOKEN_COOKIE = "em_inspect_token"
THUMB_WIDTH = 240


@dataclass
class InspectorConfig:
    data_dir: str
    timezone: str = "UTC"
    read_only: bool = False
    token: str = ""                 # required on every request when set
    host: str = "127.0.0.1"         # the address served (requests must name it, or loopback)
    planner: str = "rules"          # the Ask page's default ("": the stack's)
    audit_log: str = ""             # default: inspector_audit.jsonl in data_dir


def _thumbnail(path: Path, box: Optional[list[float]] = None, width: int = THUMB_WIDTH) -> bytes:
    """A JPEG ``width`` pixels wide of the image (or of ``box``, fractions of it)."""
    image = cv2.imread(str(path))
    if image is None:
        raise HTTPException(404, "image unreadable")
    if box:
        h, w = image.shape[:2]
        image = image[int(box[1] * h):max(int(box[3] * h), int(box[1] * h) + 1),
                      int(box[0] * w):max(int(box[2] * w), int(box[0] * w) + 1)]
        if image.size == 0:              # a box on the image's edge
            raise HTTPException(404, "the sighting's box lies outside its image")
    scale = width / image.shape[1]
    if scale < 1:
        image = cv2.resize(image, (width, max(1, round(image.shape[0] * scale))), interpolation=cv2.INTER_AREA)
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])[1].tobytes()


def token_matches(given: Optional[str], token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def same_origin(request: Request) -> bool:
    """A write from this inspector's own pages: the browser says same-origin (Sec-Fetch-Site),
    or Origin names this host; a client without either (curl, scripts) is no browser page."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is None or origin.split("://", 1)[-1] == request.headers.get("host", "")


def check_day(day: str) -> None:
    """A day filter: "all", "" or YYYY-MM-DD (else 400)."""
    if day not in ("", "all"):
        try:
            dt.date.fromisoformat(day)
        except ValueError:
            raise HTTPException(400, f"day {day!r}: expected YYYY-MM-DD") from None


def create_app(config: InspectorConfig, backend: Backend) -> FastAPI:
    reader = MemoryReader(config.data_dir, config.timezone)
    audit = AuditLog(Path(config.audit_log or Path(config.data_dir) / "inspector_audit.jsonl"))
    if not config.read_only:
        audit.check_writable()
    package = resources.files("embodied_memory.inspector")
    templates = Jinja2Templates(directory=str(package / "templates"))
    templates.env.filters["q"] = lambda s: quote(str(s), safe="")
    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        backend.close()

    app = FastAPI(title="embodied_memory inspector", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    app.mount("/static", StaticFiles(directory=str(package / "static")), name="static")
    app.state.backend, app.state.reader, app.state.audit = backend, reader, audit
    # the ask box's planners: "" is the configured one (the stack's query agent's with --ros)
    planners = [(p, p) for p in PLANNERS] if config.planner else [("", "the stack's"), *((p, p) for p in PLANNERS)]
    allowed_hosts = {"127.0.0.1", "localhost", "::1", config.host.lower()}

    @app.middleware("http")
    async def guard(request: Request, call_next):
        # DNS rebinding: only the names this server was asked to serve under
        host = request.headers.get("host", "").rsplit(":", 1)[0].strip("[]").lower()
        if host not in allowed_hosts:
            return PlainTextResponse(f"host {host!r} is not served here ({', '.join(sorted(allowed_hosts))})", 421)
        # cross-site requests (another page in the operator's browser) may not write
        if request.method not in ("GET", "HEAD") and not same_origin(request):
            return PlainTextResponse("cross-site request refused: writes come from this inspector's pages", 403)
        if config.token:
            offered = [request.query_params.get("token"), request.cookies.get(TOKEN_COOKIE),
                       request.headers.get("authorization", "").removeprefix("Bearer ").strip()]
            if not any(token_matches(t, config.token) for t in offered):
                return PlainTextResponse("a token is required (?token=... once, or Authorization: Bearer ...)", 401)
            if token_matches(request.query_params.get("token"), config.token):   # keep it out of the history
                rest = "&".join(f"{quote(k)}={quote(v)}" for k, v in request.query_params.multi_items() if k != "token")
                response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(TOKEN_COOKIE, config.token, httponly=True, samesite="strict")
                return response
        return await call_next(request)

    def page(request: Request, name: str, status_code: int = 200, **context) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"read_only": config.read_only, "tz": config.timezone,
                                                          "data_dir": config.data_dir, **context},
                                          status_code=status_code)

    def known(person: str) -> dict:
        """An identity by its id (names are not ids here: a forget must say whom it deletes)."""
        ident = reader.identity(person)
        if ident is None:
            raise HTTPException(404, f"no identity {person!r} (forgotten, merged or never seen)")
        return ident

    def writable() -> None:
        if config.read_only:
            raise HTTPException(403, "the inspector runs --read-only: naming, merging and forgetting are off")

    @app.exception_handler(StarletteHTTPException)      # also the router's 404 and 405
    async def http_error(request: Request, exc: StarletteHTTPException):
        return page(request, "error.html", exc.status_code, status=exc.status_code, message=exc.detail)

    @app.exception_handler(BackendError)
    async def backend_error(request: Request, exc: BackendError):
        return await http_error(request, HTTPException(exc.status, str(exc)))

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):
        log.exception("inspector: %s %s failed", request.method, request.url.path)
        return await http_error(request, HTTPException(500, f"the inspector failed on this request ({type(exc).__name__}: "
                                                            f"{exc}); the server log has the details"))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        said = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:])}: {e.get('msg', '')}" for e in exc.errors())
        return await http_error(request, HTTPException(400, f"bad request: {said}"))

    @app.get("/")
    def index():
        return RedirectResponse("/timeline")

    # -- timeline and observations ------------------------------------------------------
    @app.get("/timeline", response_class=HTMLResponse)
    def timeline(request: Request, day: Optional[str] = None, hour_text: str = Query("", alias="hour"), waypoint: str = "",
                 person: str = "", q: str = "", offset: int = 0):
        days = reader.days()
        if day is None:                  # no choice yet: the newest day ("all": every day)
            day = days[-1]["day"] if days and not q else "all"
        check_day(day)
        try:
            hour = int(hour_text) if hour_text.strip() else None
        except ValueError:
            raise HTTPException(400, f"hour {hour_text!r}: 0 to 23") from None
        if hour is not None and (not 0 <= hour <= 23 or day == "all"):
            raise HTTPException(400, f"hour {hour}: 0 to 23, on one day")
        if not 0 <= offset <= 10**9:
            raise HTTPException(400, f"offset {offset}: 0 to 10^9")
        results = []
        if q.strip():
            now = reader.newest_time() or time.time()     # hours ago count from the memory's newest keyframe
            hits = {h["id"]: h for h in backend.search(q, person or None, 30, now)}
            # the score is HUMEMBR's (lower is better); hours ago is its recency term
            results = [{**obs, "score": hits[obs["id"]].get("score"), "hours_ago": round((now - obs["t"]) / 3600.0, 1)}
                       for obs in reader.observations_by_id(list(hits))]
        observations = [] if q.strip() else reader.observations(None if day == "all" else day, hour, waypoint,
                                                                    person, offset=offset)
        return page(request, "timeline.html", days=days, day=day, hour=hour, waypoint=waypoint, person=person, q=q,
                    offset=offset, page_size=PAGE_SIZE,
                    observations=observations, results=results, waypoints=reader.waypoint_ids(),
                    people=reader.identities(), names=reader.names())

    @app.get("/observation/{observation_id:path}", response_class=HTMLResponse)
    def observation(request: Request, observation_id: str):
        obs = reader.observation(observation_id)
        if obs is None:
            raise HTTPException(404, f"no observation {observation_id!r}")
        return page(request, "observation.html", obs=obs, names=reader.names())

    @app.get("/image/{observation_id:path}")
    def image(observation_id: str, thumb: int = 0):
        path = reader.image_path(observation_id)
        if path is None:
            raise HTTPException(404, "no stored image for this observation")
        if thumb:
            return Response(_thumbnail(path), media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})
        return FileResponse(path, media_type="image/jpeg")

    @app.get("/crop/{sighting_id}")
    def crop(sighting_id: int):
        found = reader.crop_of(sighting_id) if 0 <= sighting_id < 2**63 else None
        if found is None:
            raise HTTPException(404, "no stored crop or keyframe for this sighting")
        return Response(_thumbnail(*found, width=160), media_type="image/jpeg")

    # -- map ------------------------------------------------------------------------------
    @app.get("/map", response_class=HTMLResponse)
    def map_page(request: Request, day: Optional[str] = None, person: str = "", color: str = "time", episode: str = ""):
        days = reader.days()
        if day is None:                  # no choice yet: the newest day, as the timeline
            day = days[-1]["day"] if days else "all"
        check_day(day)
        if color not in ("time", "person"):
            raise HTTPException(400, f"color {color!r}: time or person")
        points = reader.map_points("" if day == "all" else day, person)
        grids = reader.occupancy_maps()
        grid = next((g for g in grids if g["episode"] == episode), grids[0] if grids else None)
        view = MapView.fit(points, grid)
        names = reader.names()
        legend_people = [{"label": "unidentified" if p == "?" else names.get(p, p), "colour": person_colour(p)}
                         for p in sorted({s.get("person") or "?" for s in points["sightings"]})]
        return page(request, "map.html", view=view, points=points, day=day, person=person, color=color, grid=grid,
                    grids=grids, days=days, people=reader.identities(), names=names,
                    legend_people=legend_people,
                    clock=lambda t: reader.local(t).strftime("%H:%M" if view.t1 - view.t0 < 86400 else "%m-%d %H:%M"))

    @app.get("/occupancy/{episode:path}.png")
    def occupancy_png(episode: str):
        grid = reader.occupancy_grid(episode)
        if grid is None:
            raise HTTPException(404, f"no occupancy map for episode {episode!r}")
        return Response(MapView.grid_png(grid), media_type="image/png")

    # -- people -----------------------------------------------------------------------------
    @app.get("/people", response_class=HTMLResponse)
    def people(request: Request, message: str = ""):
        people = reader.identities()
        for p in people:
            p["crops"] = reader.best_crops(p["person"], 3)
        return page(request, "people.html", people=people, message=message, unidentified=reader.unidentified_sightings())

    @app.get("/identity-changes", response_class=HTMLResponse)
    def identity_changes(request: Request, message: str = "", propose: int = 0):
        """The journal of merges, splits, undos and reviews; consolidation's proposals on request
        (a dry run reads every stored sighting)."""
        proposal, unavailable = None, ""
        if propose:
            try:
                proposal = backend.consolidate(dry_run=True)
            except BackendError as exc:
                unavailable = str(exc)
        return page(request, "identity_changes.html", changes=reader.identity_changes(), proposal=proposal,
                    unavailable=unavailable, message=message, undoable=UNDOABLE_CHANGES)

    @app.post("/identity-changes/{change}/undo")
    def undo_identity_change(change: int):
        writable()
        done = backend.undo_identity_change(change)
        audit.write("undo_identity_change", change=change, done=done)
        return RedirectResponse(f"/identity-changes?message={quote(f'change {change} undone: {done}')}",
                                status_code=303)

    @app.post("/identity-changes/consolidate")
    def apply_consolidation(confirm: str = Form("")):
        writable()
        if confirm != "yes":
            raise HTTPException(400, "confirm=yes applies the proposals; nothing was changed")
        report = backend.consolidate(dry_run=False)
        audit.write("consolidate", merges=len(report.merges), splits=len(report.splits), relabelled=report.relabelled)
        said = f"consolidated: {len(report.merges)} merges, {len(report.splits)} splits, {report.relabelled} sightings"
        return RedirectResponse(f"/identity-changes?message={quote(said)}", status_code=303)

    @app.get("/people/{person}", response_class=HTMLResponse)
    def person_page(request: Request, person: str, message: str = ""):
        return page(request, "person.html", p=known(person), message=message,
                    others=[i for i in reader.identities() if i["person"] != person])

    @app.post("/people/{person}/name")
    def name_person(request: Request, person: str, name: str = Form(""), merge: str = Form("")):
        writable()
        ident, name = known(person), name.strip()
        other = reader.identity_named(name, other_than=person)
        if other is not None and merge != "yes":        # a name that merges two people: ask first
            return page(request, "name_merges.html", p=ident, new_name=name, other=known(other))
        kept = backend.name(person, name) or (person if reader.identity(person) else reader.identity_named(name))
        audit.write("name", person=person, name=name, kept=kept)
        said = f"named {person} {name!r}" + (f" (merged with {other}, already called so)" if other else "")
        return RedirectResponse(f"/people/{quote(kept)}?message={quote(said)}", status_code=303)

    @app.post("/people/{person}/merge")
    def merge_person(person: str, into: str = Form(...)):
        writable()
        known(person), known(into)
        if person == into:
            raise HTTPException(400, f"{person} is already itself: choose another identity to merge into")
        done = backend.merge(person, into)
        audit.write("merge", person=person, into=into, done=done)
        return RedirectResponse(f"/people/{quote(into)}?message={quote(f'merged {person} into {into}: {done}')}",
                                status_code=303)

    @app.get("/people/{person}/forget", response_class=HTMLResponse)
    def forget_preview(request: Request, person: str):
        writable()
        ident = known(person)
        preview = backend.forget(person, dry_run=True)
        return page(request, "forget.html", p=ident, preview=preview)

    @app.post("/people/{person}/forget", response_class=HTMLResponse)
    def forget_person(request: Request, person: str, confirm: str = Form("")):
        writable()
        aliases = known(person)["aliases"]
        if confirm.strip() != person:
            raise HTTPException(400, f"type the identity id {person!r} to confirm; nothing was deleted")
        try:
            result = backend.forget(person, dry_run=False)
        except BackendError as exc:
            if exc.status == 504:          # sent, no answer: it may have happened; its names go anyway
                audit.forget_names_of(person, *aliases)
                audit.write("forget", person=person, outcome=f"sent, no answer: {exc}")
            raise
        person = result["identity_id"]
        aliases = sorted({*aliases, *result.get("aliases", [])})
        audit.forget_names_of(person, *aliases)
        audit.write("forget", person=person, **{k: v for k, v in result.items() if k not in ("dry_run", "identity_id")})
        remaining = reader.remaining_of(person, aliases)
        return page(request, "forgotten.html", person=person, result=result, remaining=remaining)

    # -- ask, exploration, health ------------------------------------------------------------
    @app.get("/ask", response_class=HTMLResponse)
    def ask_form(request: Request):
        return page(request, "ask.html", question="", answer=None, calls=[], planner=config.planner, planners=planners,
                    names=reader.names())

    @app.post("/ask", response_class=HTMLResponse)
    def ask(request: Request, question: str = Form(...), planner: str = Form("")):
        if planner and planner not in PLANNERS:
            raise HTTPException(400, f"planner: unknown {planner!r} ({', '.join(PLANNERS)})")
        # a running stack answers as of its clock; a memory directory (perhaps copied off a robot) as of
        # its newest keyframe, so that "today" is the memory's last day
        as_of = None if backend.live else reader.newest_time()
        answer = backend.ask(question, planner, as_of)
        calls = answer.get("trace") or []
        evidence = reader.observations_by_id(answer.get("evidence", [])[:12])
        return page(request, "ask.html", question=question, answer=answer, calls=calls, evidence=evidence,
                    planner=planner, planners=planners, names=reader.names(),
                    as_of=(f"{reader.local(as_of).isoformat(timespec='seconds')} (the newest keyframe: \"today\" is "
                           f"the memory's last day)") if as_of else "now (the stack's clock)")

    @app.get("/exploration", response_class=HTMLResponse)
    def exploration(request: Request):
        episodes, grids = reader.episodes(), {g["episode"]: g for g in reader.occupancy_maps()}
        for e in episodes:
            e["path"] = reader.episode_path(e["episode"])
            e["grid"] = grids.get(e["episode"])
            e["view"] = MapView.fit({"observations": e["path"], "sightings": [], "waypoints": []}, e["grid"])
        return page(request, "exploration.html", episodes=episodes, rules=reader.rules())

    @app.get("/health", response_class=HTMLResponse)
    def health(request: Request):
        return page(request, "health.html", h=reader.health(), rates=reader.ingest_rates(),
                    audit=audit.tail(20), backend=backend.describes)

    return app
