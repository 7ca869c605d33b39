"""The vector file on disk: damaged files raise IndexFormatError (never crash),
and a second process shares the mapped pages instead of copying them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cortex.errors import IndexFormatError
from cortex.vectors import VectorIndex


def make(path, n=20, dim=8):
    rng = np.random.default_rng(0)
    vi = VectorIndex.create(path, dim, "fuzz-model")
    vi.rebuild_quantized()  # the int8 copy, which a file this small would not get
    vi.append(np.arange(n), rng.standard_normal((n, dim)).astype(np.float32))
    vi.close()
    return [str(path), str(path) + ".ids", str(path) + ".q8", str(path) + ".sum"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def open_and_search(path, backend):
    vi = VectorIndex.open(path)
    try:
        q = np.ones(vi.dim, dtype=np.float32)
        ids, _ = vi.search(q, 5, backend=backend)
        assert len(ids) == min(5, len(vi))
        return len(vi)
    finally:
        vi.close()


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_every_truncation_is_an_index_format_error_or_the_whole_index(tmp_path, which):
    files = make(tmp_path / "v.cvx")
    with open(files[which], "rb") as f:
        good = f.read()
    lengths = sorted(set(range(0, 80)) | set(range(500, 530)) | set(range(4090, len(good))))
    for cut in lengths:
        if cut >= len(good):
            continue
        with open(files[which], "wb") as f:
            f.write(good[:cut])
        for backend in ("native", "numpy"):
            try:
                n = open_and_search(files[0], backend)
            except IndexFormatError:
                continue
            # Only the derived int8 copy may be cut and still open (it is then unused).
            assert which == 2 and n == 20, (which, cut, backend)


def test_random_bytes_and_bit_flips_never_crash(tmp_path):
    rng = np.random.default_rng(1)
    files = make(tmp_path / "v.cvx")
    originals = [read(f) for f in files]
    outcomes = {"ok": 0, "error": 0}
    for trial in range(150):
        which = trial % 3
        data = bytearray(originals[which])
        if trial % 2:
            for at in rng.integers(0, len(data), size=int(rng.integers(1, 6))):
                data[at] ^= int(rng.integers(1, 256))
        else:
            keep = int(rng.integers(0, 600))
            data = data[:keep] + bytearray(rng.bytes(int(rng.integers(0, 5000))))
        with open(files[which], "wb") as f:
            f.write(data)
        try:
            open_and_search(files[0], "native")
            outcomes["ok"] += 1
        except IndexFormatError:
            outcomes["error"] += 1
        with open(files[which], "wb") as f:
            f.write(originals[which])
    assert outcomes["error"] > 0 and outcomes["ok"] > 0, outcomes


def test_regression_cases(tmp_path):
    """Kept from fuzzing and review: each once reached a path that must now fail cleanly."""
    files = make(tmp_path / "v.cvx", n=3, dim=1)
    good = read(files[0])
    cases = {
        # a count that overflows the byte size of the id map (dim 1)
        "huge count": good[:512]
        + (2**62 - 1).to_bytes(8, "little")
        + (~(2**62 - 1) & (2**64 - 1)).to_bytes(8, "little")
        + good[528:],
        # count and its check disagree (a torn or corrupt write)
        "torn count": good[:512] + (5).to_bytes(8, "little") + good[520:],
        "wrong version": good[:8] + (9).to_bytes(4, "little") + good[12:],
        "wrong magic": b"SQLite format 3\0" + good[16:],
        "empty file": b"",
    }
    for name, data in cases.items():
        with open(files[0], "wb") as f:
            f.write(data)
        for backend in ("native", "numpy"):
            with pytest.raises(IndexFormatError) as err:
                open_and_search(files[0], backend)
            assert "rebuild" in str(err.value) or "cortex reindex" in str(err.value), name


def test_an_id_map_of_another_index_is_refused(tmp_path):
    a = make(tmp_path / "a.cvx")
    b = make(tmp_path / "b.cvx")
    os.replace(b[1], a[1])
    with pytest.raises(IndexFormatError, match="does not belong"):
        VectorIndex.open(a[0])


_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from cortex.vectors import VectorIndex

    def rollup():
        out = {}
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1]) * 1024
        return out

    before = rollup()
    vi = VectorIndex.open(sys.argv[1])
    q = np.ones(vi.dim, dtype=np.float32)
    for _ in range(3):
        vi.search(q, 10, quantized=False)   # touches every f32 page
    after = rollup()
    print(json.dumps({k: after.get(k, 0) - before.get(k, 0) for k in after}))
    """
)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux smaps")
@pytest.mark.timeout(120)
def test_a_second_process_shares_the_pages(tmp_path):
    path = tmp_path / "v.cvx"
    n, dim = 80_000, 384  # 61 MB of f16 rows
    vi = VectorIndex.create(path, dim, "m")
    rng = np.random.default_rng(0)
    for start in range(0, n, 10_000):
        vi.append(np.arange(start, start + 10_000), rng.random((10_000, dim), dtype=np.float32))
    size = n * dim * 2
    # This process maps and touches the rows too, so the child's pages are shared.
    vi.search(np.ones(dim, np.float32), 10, quantized=False)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=100,
    )
    delta = json.loads(out.stdout)
    private = delta["Private_Clean"] + delta["Private_Dirty"]
    # Pages written by the parent and not yet flushed count as Shared_Dirty.
    assert delta["Shared_Clean"] + delta["Shared_Dirty"] > 0.9 * size, delta
    assert delta["Pss"] < 0.6 * size, delta  # the child pays half: the pages are shared
    assert private < 0.2 * size, delta
    assert delta["Anonymous"] < 0.2 * size, delta
    vi.close()


def _rewrite_version(path, version):
    """Set the main header's version and fix its checksum (an intact file of another
    version, as an older cortex wrote it)."""
    data = bytearray(read(path))
    data[8:12] = version.to_bytes(4, "little")
    h = 0xCBF29CE484222325
    for b in data[:504]:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    data[504:512] = h.to_bytes(8, "little")
    with open(path, "wb") as f:
        f.write(data)


def test_a_version_one_file_without_checksums_is_refused_with_the_fix(tmp_path):
    files = make(tmp_path / "v.cvx")
    _rewrite_version(files[0], 1)
    for backend in ("native", "numpy"):
        with pytest.raises(IndexFormatError, match=r"format version 1.*rebuild"):
            open_and_search(files[0], backend)


@pytest.mark.parametrize("row", [0, 4095, 4096, 5000])
def test_verify_names_the_block_of_a_flipped_byte(tmp_path, row):
    dim = 8
    path = tmp_path / "v.cvx"
    vi = VectorIndex.create(path, dim, "m")
    rng = np.random.default_rng(1)
    for start in (0, 3000, 4500):  # appends that straddle a block boundary
        n = {0: 3000, 3000: 1500, 4500: 600}[start]
        vi.append(np.arange(start, start + n), rng.standard_normal((n, dim)).astype(np.float32))
    vi.verify()
    vi.close()
    data = bytearray(read(path))
    data[4096 + row * dim * 2 + 1] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    block = row // 4096
    try:
        vi = VectorIndex.open(path)
    except IndexFormatError as err:  # opening checks the last block
        assert block == 1 and "checksum block 1" in str(err)
        return
    with pytest.raises(IndexFormatError, match=f"checksum block {block}"):
        vi.verify()
    vi.close()


@pytest.mark.parametrize(
    "where",
    ["byte", "byte above 127", "scale", "error bound", "row norm", "last byte"],
)
def test_verify_checks_every_int8_record_against_its_row(tmp_path, where):
    """The int8 screen rules rows out on the bound a record claims; verify() holds every
    record to its row, so a damaged record cannot hide a row unnoticed."""
    dim, n = 40, 300
    files = make(tmp_path / "v.cvx", n=n, dim=dim)
    with VectorIndex.open(files[0]) as vi:
        vi.verify()  # a fresh file passes
        assert vi.quantized_rows == n
    stride = (dim + 12 + 31) // 32 * 32
    row = 123
    at = (
        64
        + row * stride
        + {
            "byte": 5,
            "byte above 127": 5,
            "scale": dim,
            "error bound": dim + 4,
            "row norm": dim + 8,
            "last byte": dim - 1,
        }[where]
    )
    data = bytearray(read(files[2]))
    data[at] = 200 if where == "byte above 127" else data[at] ^ 0x04
    with open(files[2], "wb") as f:
        f.write(data)
    with VectorIndex.open(files[0]) as vi:
        with pytest.raises(IndexFormatError, match=f"int8 record of row {row}.*reindex"):
            vi.verify()
        vi.verify(from_row=200)  # only the rows from 200 on: this one is not checked


def test_uuid_names_the_set_of_files(tmp_path):
    files = make(tmp_path / "v.cvx")
    with VectorIndex.open(files[0]) as a, VectorIndex.open(files[0]) as b:
        first = a.uuid
        assert b.uuid == first and len(first) == 32
    make(tmp_path / "v.cvx")  # a new index at the same path: another uuid
    with VectorIndex.open(files[0]) as c:
        assert c.uuid != first


@pytest.mark.timeout(30)
@pytest.mark.parametrize("which", [0, 1, 2, 3])
@pytest.mark.parametrize("kind", ["fifo", "directory", "/dev/zero"])
def test_a_file_that_is_not_a_regular_file_is_refused_never_a_hang(tmp_path, which, kind):
    files = make(tmp_path / "v.cvx")
    target = files[which]
    os.unlink(target)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        os.mkdir(target)
    else:
        os.symlink("/dev/zero", target)
    try:
        vi = VectorIndex.open(files[0])
    except IndexFormatError as err:
        assert "reindex" in str(err) or "rebuild" in str(err)
        return
    # Only the int8 copy is optional: without it the rows are scanned in f32.
    assert which == 2
    with vi:
        assert vi.quantized_rows == 0
        ids, _ = vi.search(np.ones(vi.dim, dtype=np.float32), 5)
        assert len(ids) == 5


def test_read_floor_reads_every_byte_of_the_rows_and_records(tmp_path):
    """The bench helper's bare read folds exactly the bytes a scan reads: the f16 rows
    after the header, or the int8 records after the side header (benches/bench_topk.py)."""
    vi = VectorIndex.create(tmp_path / "v.cvx", 40, "m")
    vi.append(np.arange(1001), np.random.default_rng(2).standard_normal((1001, 40), np.float32))

    def fold(data: bytes) -> int:
        main = len(data) // 128 * 128
        out = np.bitwise_xor.reduce(np.frombuffer(data[:main], dtype="<u8"), initial=0)
        tail = np.bitwise_xor.reduce(np.frombuffer(data[main:], np.uint8), initial=0)
        return int(out) ^ int(tail)

    rows = read(tmp_path / "v.cvx")[4096 : 4096 + 1001 * 40 * 2]
    q8 = read(tmp_path / "v.cvx.q8")[64:]
    for threads in (1, 2, 3):
        assert vi._index.read_floor("rows", threads) == fold(rows)
        assert vi._index.read_floor("q8", threads) == fold(q8)
    with pytest.raises(ValueError, match="part"):
        vi._index.read_floor("ids")
