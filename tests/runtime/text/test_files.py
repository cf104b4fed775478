"""One reader of text files: plain or gzip, lines split on `\n` only, the
same lines `tf.data.TextLineDataset` reads."""

import gzip

import pytest

from keras_transformer_runtime.text import files as text_files

RAW = "eins\r\nzwei\rdrei\n\nvier ü\n".encode()
EXPECTED = ["eins", "zwei\rdrei", "", "vier ü"]


@pytest.fixture(params=["plain", "gzip"])
def path(request, tmp_path):
    if request.param == "plain":
        path = tmp_path / "lines.txt"
        path.write_bytes(RAW)
    else:
        path = tmp_path / "lines.txt.gz"
        with gzip.open(path, "wb") as f:
            f.write(RAW)
    return path


def test_lines_split_on_newlines_only_plain_or_gzip(path):
    assert text_files.read_lines(path) == EXPECTED
    assert text_files.count_lines(path) == len(EXPECTED)
    assert [line.decode() for line in text_files.split_lines(RAW)] == EXPECTED


def test_a_last_line_without_a_newline_is_a_line(tmp_path):
    path = tmp_path / "last.txt"
    path.write_bytes(b"a\nb")
    assert text_files.read_lines(path) == ["a", "b"]
    assert text_files.split_lines(b"a\nb") == [b"a", b"b"]


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffeins\nzwei\n".encode())
    assert text_files.read_lines(path) == ["eins", "zwei"]
    assert text_files.split_lines(path.read_bytes()) == [b"eins", b"zwei"]


def test_invalid_utf8_is_an_error_unless_replaced(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(UnicodeDecodeError):
        text_files.read_lines(path)
    assert text_files.read_lines(path, errors="replace") == ["ok", "\ufffd"]


def test_tf_data_reads_the_same_lines(path):
    """Training reads pairs with tf.data: the same lines, so the same
    pairs; it drops every `\r`, also one inside a line."""
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.TextLineDataset(str(path), text_files.compression_type(path))
    read = [line.decode() for line in dataset.as_numpy_iterator()]
    assert read == [line.replace("\r", "") for line in EXPECTED]
