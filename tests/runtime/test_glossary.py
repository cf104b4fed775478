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
