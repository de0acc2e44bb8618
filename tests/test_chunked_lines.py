"""``claros.chunked.ChunkedLines`` hands out exactly the lines iterating over the file
would, whatever the size of its reads, and ``claros.checkpoint_table.CheckpointTable``
reads back what was put in it, in seq order, in about 50 bytes a checkpoint."""

from __future__ import annotations

import io
import mmap
import tracemalloc
from array import array

import pytest

from claros.checkpoint_table import CheckpointTable
from claros.chunked import ChunkedLines

TEXTS = [
    b"",
    b"\n",
    b"\n\n\n",
    b"one line, no newline",
    b"one\ntwo\n",
    b"one\ntwo\nthree, unended",
    b"crlf\r\nlines\r\n",
    b"a" * 5000 + b"\n" + b"b" * 3 + b"\n" + b"c" * 7000,
]


def _lines(source: ChunkedLines) -> list[bytes]:
    out = []
    while (line := source.next_line()) is not None:
        out.append(line)
    return out


@pytest.mark.parametrize("size", [1, 2, 7, 64, None])
@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_lines_are_those_of_the_file(text: bytes, size: int | None) -> None:
    assert _lines(ChunkedLines(io.BytesIO(text).read, size)) == list(io.BytesIO(text))


@pytest.mark.parametrize("size", [1, 5, 4096])
def test_the_buffer_holds_whole_lines_only(size: int) -> None:
    text = b"".join(b"line %d\n" % i for i in range(500)) + b"tail"
    source = ChunkedLines(io.BytesIO(text).read, size)
    seen = []
    while source.fill():
        # A reader that takes the buffer takes whole lines: each ends in a newline, but
        # the stream's last one.
        chunk = source.buf[source.pos : source.end]
        assert chunk.endswith(b"\n") or chunk.endswith(b"tail")
        seen.append(chunk)
        source.pos = source.end
    assert b"".join(seen) == text
    assert source.next_line() is None


def test_lines_taken_one_by_one_and_by_the_buffer_interleave() -> None:
    text = b"".join(b"%d\n" % i for i in range(100))
    source = ChunkedLines(io.BytesIO(text).read, 16)
    got = [source.next_line()]
    assert source.fill()
    rest = source.buf[source.pos : source.end]
    source.pos = source.end
    got += [*io.BytesIO(rest), *_lines(source)]
    assert got == list(io.BytesIO(text))


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_lines_read_in_place_are_those_of_the_file(text: bytes) -> None:
    # A worker of claros verify reads its buffer where it lies, in shared memory, up to
    # where the parent filled it (what lies beyond is an earlier buffer's).
    with mmap.mmap(-1, len(text) + 4096) as shared:
        shared[: len(text)] = text
        shared[len(text) :] = b"\nnot this\n" * 409 + b"\n" * 6
        source = ChunkedLines.whole(shared, len(text))
        assert _lines(source) == list(io.BytesIO(text))
        assert not source.fill() and source.next_line() is None
    assert _lines(ChunkedLines.whole(text, len(text))) == list(io.BytesIO(text))


def test_a_read_error_reaches_the_caller() -> None:
    def broken(_: int) -> bytes:
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="disk went away"):
        ChunkedLines(broken).next_line()


def _table() -> CheckpointTable[tuple[int, str, int, str]]:
    return CheckpointTable(lambda seq, hash_, ts, key_id: (seq, hash_, ts, key_id))


def _hex(n: int) -> str:
    return f"{n:064x}"


def test_the_table_reads_back_in_seq_order_whatever_the_order_put() -> None:
    table = _table()
    for seq in (300, 100, 200, 400):
        table.put(seq, _hex(seq), seq + 1, f"key-{seq % 200}")
    table.put(200, _hex(2), 7, "key-x")  # replaced
    assert list(table) == [100, 200, 300, 400] and len(table) == 4
    assert table[200] == (200, _hex(2), 7, "key-x")
    assert table.get(100) == (100, _hex(100), 101, "key-100")
    assert table.get(150) is None and 150 not in table and "100" not in table
    with pytest.raises(KeyError):
        table[150]
    assert table.index_after(100) == 1 and table.index_after(99) == 0
    assert table.index_after(400) == 4
    assert table.hash_at(2) == _hex(300)
    table.discard(300)
    table.discard(301)  # not there: nothing happens
    assert list(table.values()) == [
        (100, _hex(100), 101, "key-100"),
        (200, _hex(2), 7, "key-x"),
        (400, _hex(400), 401, "key-0"),
    ]


def test_a_hash_that_is_not_hex_reads_back_as_given() -> None:
    table = _table()
    table.put(1, "not hex", 1, "k")
    table.put(2, "A" * 64, 2, "k")  # upper case is not the form hashes are written in
    table.put(3, _hex(3), 3, "k")
    assert [table[s][1] for s in (1, 2, 3)] == ["not hex", "A" * 64, _hex(3)]
    assert table.hash_at(0) == "not hex"
    table.put(1, _hex(1), 1, "k")  # made right: no longer aside
    assert table[1][1] == _hex(1)
    table.discard(2)
    assert list(table) == [1, 3]


def test_ten_thousand_checkpoints_take_about_half_a_megabyte() -> None:
    # What a 1M-entry export brings; as a dict of Checkpoint objects it was ~3 MB.
    hashes = [_hex(seq * 7919) for seq in range(10_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        table = _table()
        for seq, hash_ in enumerate(hashes):
            table.put(seq * 100 + 100, hash_, 1_796_000_000_000 + seq, "ed25519:0123456789abcdef")
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(table) == 10_000
    assert used < 800_000, used


def test_a_span_of_checkpoints_goes_whole_into_another_table() -> None:
    # How claros verify's parent hands a worker the checkpoints a buffer can reach.
    table = _table()
    for seq in (100, 200, 300, 400, 500):
        table.put(seq, _hex(seq), seq + 1, "key-a")
    table.put(300, "not hex", 301, "key-a")
    span = table.span(200, 401)
    assert list(span[0]) == [200, 300, 400] and len(span[1]) == 3 * 32
    assert span[2] == {300: "not hex"}
    assert table.span(201, 300)[0].tolist() == [] and table.span(600, 700)[1] == b""
    other = _table()
    other.put(50, _hex(50), 51, "key-b")
    other.put_span(span, 0, "")
    other.put_span(table.span(401, 401), 0, "")  # empty: nothing changes
    assert list(other.values()) == [
        (50, _hex(50), 51, "key-b"),
        (200, _hex(200), 0, ""),
        (300, "not hex", 0, ""),
        (400, _hex(400), 0, ""),
    ]
    assert other.hash_at(1) == _hex(200) and other.index_after(300) == 3


@pytest.mark.parametrize("why", ["not after", "hash length"])
def test_a_span_that_does_not_fit_is_refused(why: str) -> None:
    table = _table()
    table.put(300, _hex(300), 301, "k")
    seqs = array("q", [200 if why == "not after" else 400])
    hashes = bytes(32 if why == "not after" else 31)
    with pytest.raises(ValueError, match="after the checkpoints held, 32 bytes a hash"):
        table.put_span((seqs, hashes, {}), 0, "")
    assert list(table) == [300]
