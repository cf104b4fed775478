"""Text on its way to and from a runner: files of lines, sentences and
documents, languages and their tags, glossaries, and the host-side
tokenizers."""
