"""A search looks for terms rows not indexed yet only when something was written since its last
look (issue 25: one statement less per turn), and still finds what any writer added: this
connection's other index (a second keyword part over one storage), or another connection."""

from __future__ import annotations

from pathlib import Path

from ovos_memory_plugins.lexical import LexicalMemory


def test_a_second_index_over_one_storage_finds_what_the_first_wrote(tmp_path: Path) -> None:
    first = LexicalMemory({"root": str(tmp_path)})
    try:
        second = LexicalMemory({"root": str(tmp_path), "lang": "en"}, storage=first.storage)
        first.store("the giraffe sleeps standing up", "s")
        assert [h.content for h in second.search("giraffe")] == ["the giraffe sleeps standing up"]
        assert second.search("zebra") == []  # looked: nothing pending now, the same state
        first.store("a zebra has stripes", "s")  # written by the other index, on this connection
        assert [h.content for h in second.search("zebra")] == ["a zebra has stripes"]
    finally:
        first.close()


def test_a_search_finds_what_another_connection_wrote_since_its_last_look(tmp_path: Path) -> None:
    reader = LexicalMemory({"root": str(tmp_path)})
    writer = LexicalMemory({"root": str(tmp_path)})
    try:
        writer.store("the giraffe sleeps standing up", "s")
        assert len(reader.search("giraffe")) == 1
        assert reader.search("zebra") == []
        writer.store("a zebra has stripes", "s")
        assert [h.content for h in reader.search("zebra")] == ["a zebra has stripes"]
        reader.store("zebra crossings are striped too", "t")
        assert len(reader.search("zebra")) == 2
    finally:
        reader.close()
        writer.close()
