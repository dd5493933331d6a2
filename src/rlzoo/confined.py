"""The confined file layer (ground floor): every file rlzoo reads from or writes into a folder it did not just make
(a run dir, pipeline dir, sweep dir, store, record, encoder folder) goes through here.

- names are checked: a bare name has no separator, a relative name no ``..`` and no leading ``/``;
- a file is opened relative to its folder, component by component, without following links (``O_NOFOLLOW`` on dir
  fds), and must be a regular file (no symlink, FIFO, device, folder);
- every read is sized before it allocates: a byte cap per format, ``.npy`` headers (shape x dtype against the member
  and the memory budget), zip members' declared sizes, gzip and CSV streamed with byte and row caps;
- writes land inside the folder given, through a fresh file (a log cut back on resume too); an output folder rlzoo
  makes (``plots/``, ``results/``, ``enjoy/``, ``.inflight/``) or a lock file is refused when it is a link.
- the memory budget those caps use is the caller's (``memory_budget_gb`` on a command line, scoped by
  :func:`memory_budget_of`; else ``$RLZOO_MEMORY_BUDGET_GB``), never a shared file's; a log a resumed run appends to
  is opened without following a link and never waited on (:func:`open_plain`).

Each refusal is one :class:`~rlzoo.errors.Refused` line naming the path, what it is and what is allowed.
"""

from __future__ import annotations

import errno
import gzip
import io
import itertools
import json
import math
import os
import re
import stat
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePosixPath
from typing import IO, Any

from rlzoo.errors import Refused

MiB = 1 << 20
GiB = 1 << 30
JSON_CAP = 16 * MiB  # a JSON file (metrics, record, state, provenance, .inflight entries)
YAML_CAP = 4 * MiB  # a config.yaml, store.yaml
CSV_CAP = 512 * MiB  # a monitor / returns CSV, plain or once decompressed
ROW_CAP = 10_000_000  # rows of one CSV
PICKLE_CAP = 16 * MiB  # the ``data.pkl`` of a ``.pth`` (tensor index; the tensors are separate members)
ZIP_RATIO = 200  # a compressed member may expand to this many times its size (+ 1 MiB): deflate bombs reach ~1,000
MEMORY_ENV = "RLZOO_MEMORY_BUDGET_GB"
MEMORY_KEY = "memory_budget_gb"  # the run key of train, enjoy, report and the pipeline (the caller's, never a file's)
DEFAULT_MEMORY_GB = 16.0
NAME = re.compile(r"^[A-Za-z0-9_.=+,@-]{1,200}$")
RAISE_BUDGET = f"raise the memory budget on your command line ({MEMORY_KEY}=<GiB>, or ${MEMORY_ENV})"
_CHOSEN_GB: ContextVar[float | None] = ContextVar("rlzoo_memory_budget_gb", default=None)


def budget_gib(value: object, what: str = MEMORY_KEY) -> float:
    """``value`` as a positive, finite number of GiB; one line naming ``what`` otherwise."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise Refused(f"{what}={value!r}: a positive number of GiB is allowed (e.g. {MEMORY_KEY}=32)")
    return number


def memory_budget() -> int:
    """Bytes one load or one config may ask for: the caller's ``memory_budget_gb`` (:func:`memory_budget_of`, from
    the command line), else ``$RLZOO_MEMORY_BUDGET_GB``, else 16 GiB; never a shared file's."""
    chosen = _CHOSEN_GB.get()
    if chosen is not None:
        return int(chosen * GiB)
    text = os.environ.get(MEMORY_ENV, "")
    return int((budget_gib(text, MEMORY_ENV) if text else DEFAULT_MEMORY_GB) * GiB)


@contextmanager
def memory_budget_of(gib: object) -> Iterator[None]:
    """Within the block (this thread and context), the memory budget is ``gib`` GiB; None: unchanged."""
    if gib is None:
        yield
        return
    token = _CHOSEN_GB.set(budget_gib(gib))
    try:
        yield
    finally:
        _CHOSEN_GB.reset(token)


def bare_name(name: object, what: str) -> str:
    """``name`` when it is a bare file or folder name (letters, digits, ``_.=+,@-``; not ``.``/``..``)."""
    if not isinstance(name, str) or not NAME.match(name) or name in (".", ".."):
        raise Refused(f"{what}={str(name)[:80]!r} is not a bare name; letters, digits and _.=+,@- are allowed")
    return name


def relative_name(name: str | PurePosixPath, what: str) -> PurePosixPath:
    """``name`` as a relative path of bare names (no ``..``, not absolute, no empty part)."""
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or "\\" in str(name):
        raise Refused(f"{what}={str(name)[:80]!r} is not a relative name inside its folder")
    for part in path.parts:
        bare_name(part, what)
    return path


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "a device or socket" if not stat.S_ISREG(mode) else "a file"


@contextmanager
def _folder_fd(folder: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A dir fd of ``folder / parts`` reached without following a link below ``folder``."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                raise Refused(
                    f"{folder / part}: not a folder of its own (a link or a file); plain folders only"
                ) from None
            os.close(fd)
            fd, folder = inner, folder / part
        yield fd
    finally:
        os.close(fd)


@contextmanager
def open_regular(folder: Path, name: str | PurePosixPath, cap: int) -> Iterator[IO[bytes]]:
    """Open ``folder/name`` for reading: a regular file of at most ``cap`` bytes, reached without a link."""
    relative = relative_name(name, f"a file of {folder}")
    path = folder / relative
    with _folder_fd(folder, relative.parts[:-1]) as dir_fd:
        try:
            fd = os.open(relative.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError as error:
            if error.errno == errno.ELOOP:  # the name is a symlink
                raise Refused(f"{path} is a symlink; a shared folder holds plain files only") from None
            raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Refused(f"{path} is {_kind(info.st_mode)}; a shared folder holds plain files only")
    if info.st_size > cap:
        os.close(fd)
        raise Refused(f"{path} holds {info.st_size} bytes; at most {cap} are read from a shared folder")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as stream:
        yield stream


def open_plain(path: Path, mode: str) -> io.TextIOWrapper:
    """``path`` (a log of a run dir that a resumed run goes on writing) opened as text for appending (``"a"``,
    created when missing) or reading and writing (``"r+"``) without following a link; a FIFO, device or folder there
    is refused in one line (no open that waits)."""
    flags = {"a": os.O_WRONLY | os.O_APPEND | os.O_CREAT, "r+": os.O_RDWR}[mode]
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as error:
        kinds = {errno.ELOOP: "a symlink", errno.ENXIO: "a FIFO", errno.EISDIR: "a folder"}  # ENXIO: no reader
        if error.errno in kinds:
            raise Refused(f"{path} is {kinds[error.errno]}; rlzoo keeps a plain file there") from None
        raise
    mode_bits = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode_bits):
        os.close(fd)
        raise Refused(f"{path} is {_kind(mode_bits)}; rlzoo keeps a plain file there")
    os.set_blocking(fd, True)
    stream = os.fdopen(fd, mode, encoding="utf-8")
    assert isinstance(stream, io.TextIOWrapper)  # a text mode
    return stream


def read_bytes(folder: Path, name: str | PurePosixPath, cap: int = JSON_CAP) -> bytes:
    """The bytes of ``folder/name`` (see :func:`open_regular`)."""
    with open_regular(folder, name, cap) as stream:
        return stream.read(cap + 1)[:cap]


def read_text(folder: Path, name: str | PurePosixPath, cap: int = JSON_CAP) -> str:
    data = read_bytes(folder, name, cap)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise Refused(f"{folder / name} is not UTF-8 text") from None


def _finite(text: str) -> float:
    raise ValueError(f"{text} is not a finite number")


def parse_json(text: str | bytes, where: object, finite: bool = False) -> Any:
    """JSON; with ``finite``, finite numbers only (``NaN``/``Infinity`` refused in one line naming ``where``: a
    record's figures; rlzoo's own state files may hold them)."""
    try:
        return json.loads(text, parse_constant=_finite if finite else None)
    except ValueError as error:
        shown = str(error).splitlines()[0][:120]
        raise Refused(f"{where}: not plain JSON (with finite numbers where figures are kept: {shown})") from None


def read_json(folder: Path, name: str | PurePosixPath, cap: int = JSON_CAP, finite: bool = False) -> Any:
    """A JSON file of ``folder`` (see :func:`parse_json`)."""
    return parse_json(read_bytes(folder, name, cap), folder / name, finite)


def stream_lines(folder: Path, name: str | PurePosixPath, byte_cap: int = CSV_CAP, rows: int = ROW_CAP) -> list[str]:
    """The text lines of a CSV of ``folder``, plain or gzipped (``.gz``), read at most ``byte_cap`` bytes (after
    decompression) and ``rows`` lines: a bigger file is one line, whatever its size on disk."""
    with open_regular(folder, name, byte_cap) as raw:
        return _capped_lines(raw, folder / name, byte_cap, rows)


def lines_of(data: bytes, where: Path, byte_cap: int = CSV_CAP, rows: int = ROW_CAP) -> list[str]:
    """The text lines of a CSV held in memory (read from a shared folder before), gzipped when ``where`` ends in
    ``.gz``, within the same caps as :func:`stream_lines`."""
    return _capped_lines(io.BytesIO(data), where, byte_cap, rows)


def _capped_lines(raw: IO[bytes], path: Path, byte_cap: int, rows: int) -> list[str]:
    stream: Any = gzip.GzipFile(fileobj=raw) if path.name.endswith(".gz") else raw
    lines: list[str] = []
    read = 0
    try:
        while line := stream.readline(byte_cap - read + 1):  # a line without an end is cut at the cap, not read whole
            read += len(line)
            if read > byte_cap or len(lines) >= rows:
                raise Refused(f"{path} holds more than {byte_cap} bytes or {rows} rows; larger logs are refused")
            lines.append(line.decode(errors="replace"))
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise Refused(f"{path} cannot be read ({type(error).__name__}: {error})") from None
    return lines


def count_lines(folder: Path, name: str | PurePosixPath) -> int:
    """The complete lines (ending in a newline) of a file of ``folder``, streamed (a half-written last line is not
    counted); at most the memory budget's bytes."""
    with open_regular(folder, name, memory_budget()) as stream:
        return sum(1 for line in stream if line.endswith(b"\n"))


def keep_lines(folder: Path, name: str | PurePosixPath, keep: int) -> None:
    """Cut a file of ``folder`` back to its first ``keep`` lines, written through a fresh file (:func:`write_bytes`)."""
    with open_regular(folder, name, memory_budget()) as stream:
        kept = b"".join(itertools.islice(stream, keep))
    write_bytes(folder, name, kept)


def check_zip_member(info: zipfile.ZipInfo, where: object, cap: int, ratio: int = ZIP_RATIO) -> None:
    """Refuse a zip member that would expand beyond ``cap`` bytes or ``ratio`` times its compressed size."""
    limit = min(cap, ratio * info.compress_size + MiB) if info.compress_type != zipfile.ZIP_STORED else cap
    if info.file_size > limit:
        raise Refused(
            f"{where}: member {info.filename!r} expands to {info.file_size} bytes from {info.compress_size}; at most "
            f"{limit} are read (cap {cap}, ratio {ratio}); for a larger file you trust, {RAISE_BUDGET}"
        )


def check_zip(archive: zipfile.ZipFile, where: object, cap: int | None = None) -> None:
    """Every member of ``archive`` within :func:`check_zip_member`'s limits, and their sum within the budget; a
    ``.pth`` member (itself a zip) has its pickle within :data:`PICKLE_CAP`."""
    budget = memory_budget() if cap is None else cap
    total = 0
    for info in archive.infolist():
        check_zip_member(info, where, budget)
        total += info.file_size
        if info.filename.endswith(".pth"):
            with archive.open(info) as member:
                _check_pth(io.BytesIO(member.read()), f"{where}:{info.filename}", budget)
    if total > budget:
        raise Refused(f"{where}: its members expand to {total} bytes; the memory budget is {budget}; {RAISE_BUDGET}")


def _check_pth(data: IO[bytes], where: str, budget: int) -> None:
    if not zipfile.is_zipfile(data):
        return  # torch's legacy format: torch.load(weights_only=True) reads it, or refuses it
    with zipfile.ZipFile(data) as inner:
        for info in inner.infolist():
            cap = PICKLE_CAP if info.filename.endswith(".pkl") else budget
            check_zip_member(info, where, cap)


def load_npz(folder: Path, name: str | PurePosixPath, cap: int | None = None) -> dict[str, Any]:
    """The arrays of an ``.npz`` of ``folder``, each header checked before its array is built: no object dtype,
    shape x dtype equal to the member's size, the sum within ``cap`` (default: the memory budget)."""
    import numpy as np

    budget = memory_budget() if cap is None else cap
    path = folder / name
    arrays: dict[str, Any] = {}
    with open_regular(folder, name, budget + 64 * MiB) as stream:
        try:
            with zipfile.ZipFile(stream) as archive:
                total = 0
                for info in archive.infolist():
                    check_zip_member(info, path, budget)
                    with archive.open(info) as member:
                        total += _npy_size(member, info, path)
                    if total > budget:
                        raise Refused(
                            f"{path}: its arrays hold over {budget} bytes (the memory budget); {RAISE_BUDGET}"
                        )
                for info in archive.infolist():
                    with archive.open(info) as member:
                        arrays[info.filename.removesuffix(".npy")] = np.lib.format.read_array(
                            member, allow_pickle=False
                        )
        except Refused:
            raise
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
            raise Refused(f"{path} cannot be read as plain arrays ({str(error).splitlines()[0][:120]})") from None
    return arrays


def _npy_size(member: IO[bytes], info: zipfile.ZipInfo, path: Path) -> int:
    """The bytes the ``.npy`` member's header announces, checked against the member's size."""
    import numpy as np

    version = np.lib.format.read_magic(member)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        raise Refused(f"{path}: member {info.filename!r} is .npy format {version}; formats 1.0 and 2.0 are read")
    shape, _fortran, dtype = readers[version](member)
    if dtype.hasobject:
        raise Refused(
            f"{path}: member {info.filename!r} holds Python objects (a pickle): plain arrays only, allow_pickle=False"
        )
    size = math.prod(int(d) for d in shape) * dtype.itemsize
    if size + member.tell() != info.file_size:
        raise Refused(
            f"{path}: member {info.filename!r} announces {shape} of {dtype} ({size} bytes) in "
            f"{info.file_size} bytes; a header matches its data"
        )
    return size


def output_folder(path: Path) -> Path:
    """``path`` made if missing (its parent must exist), refused when it is a link or not a folder: rlzoo writes
    its outputs (``plots/``, ``results/``, ``enjoy/``, ``.inflight/``) into folders of its own."""
    if path.is_symlink():
        raise Refused(f"{path} is a symlink; rlzoo writes its outputs into a plain folder only (remove the link)")
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or not stat.S_ISDIR(os.lstat(path).st_mode):
        raise Refused(f"{path} is not a plain folder; rlzoo writes its outputs into a plain folder only")
    return path


def check_not_link(path: Path, what: str) -> Path:
    """``path`` (a lock, a record written in place) when it is absent or a regular file, not a link."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if not stat.S_ISREG(mode):
        raise Refused(f"{what} {path} is {_kind(mode)}; rlzoo keeps a plain file there (remove it)")
    return path


def write_bytes(folder: Path, name: str | PurePosixPath, data: bytes) -> Path:
    """Write ``data`` as ``folder/name`` (atomically, through a fresh file), never through a link: every folder on
    the way below ``folder`` is made plain or refused."""
    relative = relative_name(name, f"a file of {folder}")
    target = folder
    for part in relative.parts[:-1]:
        target = output_folder(target / part)
    path = check_not_link(target / relative.name, "the file")
    temporary = target / f".{relative.name}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()
    return path


def read_weights(folder: Path, name: str) -> io.BytesIO:
    """The bytes of a ``torch.save`` file of ``folder`` (for ``torch.load(weights_only=True)``): at most the memory
    budget, its pickle within :data:`PICKLE_CAP` and its members within :func:`check_zip_member`'s limits."""
    budget = memory_budget()
    data = io.BytesIO(read_bytes(folder, name, budget))
    _check_pth(data, str(folder / name), budget)
    data.seek(0)
    return data
