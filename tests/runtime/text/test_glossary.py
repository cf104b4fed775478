"""Glossary terms found in sources as whole words, longest first."""

import pytest

from keras_transformer_runtime import Glossary


def test_terms_match_whole_words_after_normalization_longest_first():
    glossary = Glossary(
        [("contract", "Vertrag"), ("sales contract", "Kaufvertrag"), ("Straße", "street")]
    )
    assert glossary.constraints("The SALES contract, and a contract.") == ["Kaufvertrag", "Vertrag"]
    assert glossary.constraints("contracts and subcontract") == []  # not whole words
    assert glossary.constraints("Die STRASSE") == ["street"]  # case folding: ß -> ss
    assert glossary.constraints("ﬁne ｃｏｎｔｒａｃｔ") == ["Vertrag"]  # NFKC
    assert Glossary([]).constraints("anything") == []


def test_files_and_bad_entries(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("# legal terms\ncontract\tVertrag\n\nparty\tPartei\n", encoding="utf-8")
    glossary = Glossary.from_tsv(path)
    assert len(glossary) == 2 and glossary.constraints("a party") == ["Partei"]
    path.write_text("contract\tVertrag\nparty Partei\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"terms.tsv:2: a glossary line is 'source<TAB>target'"):
        Glossary.from_tsv(path)
    with pytest.raises(ValueError, match="needs a source term and a target term"):
        Glossary([("contract", " ")])
    with pytest.raises(ValueError, match=r"may not hold '\|\|\|'"):
        Glossary([("a", "b ||| c")])
    with pytest.raises(ValueError, match="given twice"):
        Glossary([("Contract", "Vertrag"), ("contract", "Kontrakt")])


def test_a_byte_order_mark_does_not_hide_the_first_entry(tmp_path):
    """Windows editors save UTF-8 with a byte-order mark: the first term
    must still match (it kept U+FEFF and never did)."""
    path = tmp_path / "terms.tsv"
    path.write_bytes("\ufeffcontract\tVertrag\r\nparty\tPartei\r\n".encode())
    glossary = Glossary.from_tsv(path)
    assert glossary.constraints("the contract and the party") == ["Vertrag", "Partei"]


@pytest.mark.parametrize(
    "lines, message",
    [
        ("contract\tVertrag\n\t Partei\n", r"terms.tsv:2: A glossary entry needs a source term"),
        ("contract\tVertrag\nparty\t \n", r"terms.tsv:2: A glossary entry needs a source term"),
        (
            "# terms\ncontract\tVertrag\nparty\tPartei\nContract\tKontrakt\n",
            r"terms.tsv:4: The source term 'Contract' is given twice.*first given on line 2",
        ),
        ("contract\tVertrag\tKontrakt\n", r"terms.tsv:1: a glossary line .* 2 tabs"),
    ],
)
def test_a_malformed_line_is_refused_with_its_number(tmp_path, lines, message):
    path = tmp_path / "terms.tsv"
    path.write_text(lines, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        Glossary.from_tsv(path)


def test_the_same_entry_twice_is_one_entry(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("contract\tVertrag\nContract\tVertrag\n", encoding="utf-8")
    assert len(Glossary.from_tsv(path)) == 1
