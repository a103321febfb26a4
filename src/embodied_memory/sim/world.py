"""A MiniWorld office: named rooms joined by a corridor, furniture and small objects, and
people as human-sized billboards whose heads are real portrait images (MiniWorld ships 82),
so the real face models (YuNet + SFace) can detect and recognise them.

Import this module before anything else imports ``miniworld``: it switches pyglet to headless
(EGL) rendering, which MiniWorld needs on a machine without a display.
"""
from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
import pyglet  # noqa: E402

pyglet.options["headless"] = True
import cv2  # noqa: E402
from miniworld.entity import Box, Entity, MeshEnt  # noqa: E402
from miniworld.miniworld import MiniWorldEnv  # noqa: E402
from miniworld.opengl import Texture  # noqa: E402
from pyglet.gl import (GL_QUADS, GL_TEXTURE_2D, glBegin, glColor3f, glDisable, glEnable, glEnd,  # noqa: E402
                       glNormal3f, glPopMatrix, glPushMatrix, glRotatef, glTexCoord2f, glTranslatef, glVertex3f)

PERSON_WIDTH, PERSON_HEIGHT = 0.5, 1.7
DOOR_CLEARANCE = 0.7      # objects stand at least this far (beyond their radius) from a door passage

from .floor_plans import OFFICE, FloorPlan  # noqa: E402

# the office of the people episodes (sim.floor_plans): rooms name -> (min_x, max_x, min_z, max_z)
ROOMS = OFFICE.rooms
DOORS = {door.rooms[1]: (door.lo, door.hi) for door in OFFICE.doors}   # room -> its door onto the corridor


_OBJECT_NAMES = {"box": "{colour} box", "barrel": "barrel", "cone": "traffic cone", "medkit": "first aid kit",
                 "duckie": "rubber duck", "office_desk": "office desk", "office_chair": "office chair"}


def object_name(kind: str, colour: str = "") -> str:
    """What people (and a describer) call a MiniWorld object: ("box", "red") -> "red box"."""
    return _OBJECT_NAMES.get(kind, kind).format(colour=colour).strip()


room_centre = OFFICE.centre
room_of = OFFICE.room_of


def portrait_paths() -> list[Path]:
    import miniworld
    return sorted((Path(miniworld.__file__).parent / "textures" / "portraits").glob("*.png"))


def face_crop(image: np.ndarray, detector) -> np.ndarray | None:
    """The portrait's face, with a margin, as a square (None if no clear frontal face)."""
    faces = [f for f in detector.detect(image) if f.score >= 0.85]
    if len(faces) != 1:
        return None
    x1, y1, x2, y2 = faces[0].box
    cx, cy, side = (x1 + x2) / 2, (y1 + y2) / 2, 1.5 * max(x2 - x1, y2 - y1)
    h, w = image.shape[:2]
    a, b = int(max(0, cx - side / 2)), int(max(0, cy - side / 2))
    crop = image[b:min(h, int(b + side)), a:min(w, int(a + side))]
    return crop if min(crop.shape[:2]) >= 40 else None


def usable_portraits(limit: int = 100) -> list[Path]:
    """Stock portraits in which YuNet finds one clear frontal face (about half of the 82)."""
    from ..perception.faces import YuNetSFace
    detector = YuNetSFace(score_threshold=0.6, min_size=16)
    return [p for p in portrait_paths() if face_crop(cv2.imread(str(p)), detector) is not None][:limit]


def photo_faces(faces_dir: str | Path) -> list[tuple[str, Path, Path]]:
    """People from a folder of labelled photos (``NAME/*.jpg``, as face_recognition's examples):
    (name, photo for the billboard, a DIFFERENT photo held out for testing recognition), for
    every person with two photos whose first shows one clear frontal face."""
    from ..perception.faces import YuNetSFace
    detector = YuNetSFace(score_threshold=0.6, min_size=16)
    out = []
    for person in sorted(p for p in Path(faces_dir).iterdir() if p.is_dir()):
        photos = sorted(p for p in person.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
        if len(photos) >= 2 and face_crop(cv2.imread(str(photos[0])), detector) is not None:
            out.append((person.name, photos[0], photos[1]))
    return out


@dataclass(frozen=True)
class Outfit:
    """What a person wears on one day (BGR colours): the body re-ID only ever sees this."""
    shirt: tuple[int, int, int]
    trousers: tuple[int, int, int] = (60, 50, 40)
    stripes: tuple[int, int, int] | None = None     # horizontal stripes of this colour on the shirt
    hair_band: tuple[int, int, int] | None = None   # a cap's band over the top of the head


def person_texture(portrait: Path, outfit: Outfit | tuple[int, int, int], out_dir: Path, tag: str = "") -> Path:
    """A full-body texture: the portrait's face (about 0.2 m wide) as the head over a drawn body
    in ``outfit`` (a bare shirt colour: that shirt over the default trousers)."""
    from ..perception.faces import YuNetSFace
    outfit = outfit if isinstance(outfit, Outfit) else Outfit(tuple(outfit))
    w, h = 256, int(256 * PERSON_HEIGHT / PERSON_WIDTH)
    tex = np.full((h, w, 3), 235, np.uint8)
    px = w / PERSON_WIDTH                                   # pixels per metre
    crop = face_crop(cv2.imread(str(portrait)), YuNetSFace(score_threshold=0.6, min_size=16))
    if crop is None:
        raise ValueError(f"{portrait.name}: no clear frontal face (use usable_portraits())")
    head_px = int(0.30 * px)                                # the crop (face x 1.5) spans 0.30 m
    crop = cv2.resize(crop, (head_px, head_px))
    top = int((PERSON_HEIGHT - 1.53) * px - head_px / 2)    # head centred 1.53 m up
    left = (w - head_px) // 2
    tex[top:top + head_px, left:left + head_px] = crop
    if outfit.hair_band is not None:                        # the crown of the head only (the face stays clear)
        cv2.rectangle(tex, (left, top), (left + head_px - 1, top + head_px // 10), outfit.hair_band, -1)
    torso_top, torso_bottom = top + head_px, int((PERSON_HEIGHT - 0.85) * px)
    x0, x1 = int(0.08 * px), w - int(0.08 * px)
    cv2.rectangle(tex, (x0, torso_top), (x1, torso_bottom), outfit.shirt, -1)
    if outfit.stripes is not None:
        step = max(4, (torso_bottom - torso_top) // 8)
        for y in range(torso_top + step // 2, torso_bottom, step):
            cv2.rectangle(tex, (x0, y), (x1, min(torso_bottom, y + step // 2 - 1)), outfit.stripes, -1)
    cv2.rectangle(tex, (int(0.12 * px), torso_bottom), (w // 2 - 4, h - 1), outfit.trousers, -1)
    cv2.rectangle(tex, (w // 2 + 4, torso_bottom), (w - int(0.12 * px), h - 1), outfit.trousers, -1)
    path = out_dir / f"person_{portrait.stem}{tag}.png"
    cv2.imwrite(str(path), tex)
    return path


class PersonBillboard(Entity):
    """A standing person: a textured quad (front) and a plain back, turned towards ``face``."""

    def __init__(self, tex_name: str):
        super().__init__()
        self.tex = Texture.get(tex_name)
        self.radius = 0.3
        self.height = PERSON_HEIGHT

    @property
    def is_static(self):
        return False  # static entities are baked into a display list at reset

    def render(self):
        hw, h = PERSON_WIDTH / 2, PERSON_HEIGHT
        glPushMatrix()
        glTranslatef(*self.pos)
        glRotatef(self.dir * (180 / math.pi), 0, 1, 0)
        glColor3f(1, 1, 1)
        glEnable(GL_TEXTURE_2D)
        self.tex.bind()
        glBegin(GL_QUADS)                         # front, facing +x of the entity frame
        glNormal3f(1, 0, 0)
        glTexCoord2f(1, 1); glVertex3f(0.02, h, -hw)  # noqa: E702
        glTexCoord2f(0, 1); glVertex3f(0.02, h, hw)  # noqa: E702
        glTexCoord2f(0, 0); glVertex3f(0.02, 0, hw)  # noqa: E702
        glTexCoord2f(1, 0); glVertex3f(0.02, 0, -hw)  # noqa: E702
        glEnd()
        glDisable(GL_TEXTURE_2D)
        glColor3f(0.25, 0.22, 0.2)
        glBegin(GL_QUADS)                         # back, a separate face 4 cm behind
        glNormal3f(-1, 0, 0)
        glVertex3f(-0.02, h, hw); glVertex3f(-0.02, h, -hw)  # noqa: E702
        glVertex3f(-0.02, 0, -hw); glVertex3f(-0.02, 0, hw)  # noqa: E702
        glEnd()
        glPopMatrix()


@dataclass
class SimPerson:
    name: str
    portrait: Path
    entity: PersonBillboard


class OfficeWorld(MiniWorldEnv):
    """A floor plan's rooms (the office by default), furniture, objects (some move between days),
    people billboards."""

    def __init__(self, people: list[tuple[str, Path]], seed: int = 0, width: int = 640, height: int = 480,
                 objects: list[tuple[str, str, str]] = (), object_size: float = 0.5, plan: FloorPlan = OFFICE):
        self.plan = plan
        self._people_spec = people
        self._objects_spec = list(objects)   # (kind, colour, room)
        self._object_size = object_size
        self._seed = seed
        self._tex_tmp = tempfile.TemporaryDirectory(prefix="em_sim_tex_")   # removed with the world
        self._tex_dir = Path(self._tex_tmp.name)
        self.people: list[SimPerson] = []
        self.objects: list[tuple[str, str, Entity]] = []
        # window_*: MiniWorld's human view, never shown here; its 16x multisampled framebuffer is
        # the bulk of what each world holds on the GPU side (MiniWorld's close does not free it)
        super().__init__(obs_width=width, obs_height=height, max_episode_steps=10 ** 9, window_width=16,
                         window_height=16)

    def close(self):
        super().close()
        window, self.shadow_window = getattr(self, "shadow_window", None), None
        if window is not None:        # MiniWorld's close leaves its hidden GL window open
            window.close()
        self._tex_tmp.cleanup()

    def _gen_world(self):
        plan = self.plan
        rooms = {name: self.add_rect_room(min_x=x0, max_x=x1, min_z=z0, max_z=z1,
                                          wall_tex="concrete" if name == plan.hub and name != plan.entrance
                                          else "drywall",
                                          floor_tex="marble" if name in plan.marble else "floor_tiles_bw")
                 for name, (x0, x1, z0, z1) in plan.rooms.items()}
        for door in plan.doors:
            a, b = (rooms[r] for r in door.rooms)
            if plan.door_along_x(door):
                self.connect_rooms(a, b, min_x=door.lo, max_x=door.hi)
            else:
                self.connect_rooms(a, b, min_z=door.lo, max_z=door.hi)
        rng = np.random.default_rng(self._seed)
        for name in plan.furnished:
            x, z = plan.centre(name)
            self.place_entity(MeshEnt(mesh_name="office_desk", height=0.8), pos=[x + 1.5, 0, z + 1.5], dir=0.0)
            self.place_entity(MeshEnt(mesh_name="office_chair", height=0.9), pos=[x + 0.5, 0, z + 1.5], dir=0.0)
        self.objects = []
        for kind, colour, room in self._objects_spec:
            x0, x1, z0, z1 = plan.rooms[room]
            size = self._object_size
            ent = Box(color=colour, size=size) if kind == "box" else MeshEnt(mesh_name=kind, height=size, static=False)
            self.place_entity(ent, min_x=x0 + 0.8, max_x=x1 - 0.8, min_z=z0 + 0.8, max_z=z1 - 0.8)
            for _ in range(100):
                if not plan.near_door(ent.pos[0], ent.pos[2], ent.radius + DOOR_CLEARANCE):
                    break
                self.entities.remove(ent)                  # it would close a door: elsewhere in its room
                self.place_entity(ent, min_x=x0 + 0.8, max_x=x1 - 0.8, min_z=z0 + 0.8, max_z=z1 - 0.8)
            else:
                raise RuntimeError(f"floor plan {plan.name}: no place in the {room} clear of its doors")
            self.objects.append((kind, colour, ent))
        self.people = []
        shirts = [(40, 40, 200), (200, 80, 40), (40, 160, 40), (150, 60, 150), (30, 140, 200)]
        for i, (name, portrait) in enumerate(self._people_spec):
            tex_name = f"em_person_{i}"
            Texture.tex_paths[tex_name] = [str(person_texture(portrait, shirts[i % len(shirts)], self._tex_dir))]
            ent = PersonBillboard(tex_name)
            self.place_entity(ent, pos=[100.0 + 3 * i, 0, 100.0], dir=0.0)   # parked far away
            self.people.append(SimPerson(name, portrait, ent))
        self.place_agent(pos=[0.0, 0, -0.5], dir=0.0)
        del rng
