"""Third parties a request names ("my friend Bob's address", "我女儿的地址"), found among
the subjects of the principal's own memory, never beside it.

A person is known by the parts of their identifier, by `name` facts about them, by the
user's own facts that name them (user.sibling = "Kavya"), and by how the user spoke of
them in the turns their facts came from ("我朋友小李住在..."). A relation word names
the people the user's relation facts of that kind name, as the turns said it ("my
daughter Ellie", not "my son Jack", though both are user.child).
"""

from __future__ import annotations

import re

from memory_ledger.forgetting.planning.lexicon import Lexicon
from memory_ledger.forgetting.planning.pool import Pool, Row
from memory_ledger.forgetting.planning.reading import Reading
from memory_ledger.forgetting.planning.text_match import mentions
from memory_ledger.phrases import normalise

NAME_PREDICATES = ("name", "full_name", "first_name", "nickname", "chinese_name")


class People:
    """Who a request is about, when it is not the user."""

    def __init__(self, pool: Pool, words: Lexicon, reading: Reading, text: str) -> None:
        self.pool = pool
        self.lex = words
        self.reading = reading
        self.text = text
        #: Each third party's names, once `named` has run.
        self.aliases: dict[str, set[str]] = {}
        self._carriers: dict[str, str] | None = None
        self._relation_facts: list[str] | None = None

    def named(self) -> list[str] | None:
        """The third parties the request names (None: it names none, so it is about the
        user). An empty list: it names someone who is not in this memory. A name beats
        a relation ("my friend Bob": Bob, not every friend)."""
        others = sorted({r.subject for r in self.pool.rows if r.subject != "user"})
        reading = self.reading
        asked_names = self._possessive_names()
        aliases = self._aliases(others, asked_names)
        self.aliases = aliases
        by_name = {s for s, names in aliases.items() if any(mentions(self.text, n) for n in names)}
        by_relation = {s for relation in reading.relations for s in self._related(relation, others)}
        if len(by_name) > 1:
            by_name = self._closest(by_name, asked_names) or by_name
        if by_name:
            both = by_name & by_relation
            return sorted(both or by_name)
        if by_relation:
            return sorted(by_relation)
        if reading.relations or asked_names:
            return []
        return None

    def _closest(self, subjects: set[str], names: list[str]) -> set[str]:
        """Of several third parties one turn names, the one whose value the name stands
        next to ("诊所电话010-8597 1234，张医生的手机010-6915 6114": Dr Zhang's is the
        second)."""
        rows = [r for r in self.pool.rows if r.kind != "turn" and r.subject in subjects]
        values = self.pool.texts([r.item_id for r in rows])
        carriers = self._carrier_texts(rows)
        distance: dict[str, int] = {}
        for row in rows:
            text, value = carriers.get(row.subject, ""), normalise(values.get(row.item_id) or "")
            at = text.find(value) if value else -1
            for name in names:
                spot = text.find(name)
                if at >= 0 and spot >= 0:
                    gap = at - spot if at >= spot else 10 * (spot - at)  # a name precedes
                    distance[row.subject] = min(distance.get(row.subject, gap), gap)
        if not distance:
            return set()
        best = min(distance.values())
        return {s for s, d in distance.items() if d == best}

    def _possessive_names(self) -> list[str]:
        """Who the request says a thing belongs to, when it is not the user: "Carol's",
        "小李的" (relation words and "my" set aside)."""
        lex = self.lex
        found = []
        for m in lex.patterns.possessive_en.finditer(self.text):
            word = m.group(1)
            common = word in lex.patterns.not_names or word in lex.stopwords
            if not (common or lex.relations.any(word) or lex.concepts.any(word)):
                found.append(word)
        known = {  # names the user's facts give people ("朋友: 刘洋")
            normalise(v)
            for v in self.pool.texts(self._relation_fact_ids()).values()
            if v
        }  # fmt: skip
        for m in re.finditer(r"([\u4e00-\u9fff]{2,3})的", self.text):
            if m.group(1) in known:
                found.append(m.group(1))
        for (
            pattern
        ) in lex.patterns.names_zh:  # Chinese has no capitals: names by their usual shapes
            for m in pattern.finditer(self.text):
                word = m.group(1)
                if (
                    len(word) >= 2
                    and word not in lex.patterns.not_names_zh
                    and not lex.concepts.any(word)
                ):
                    found.append(word)
        return found

    def _aliases(self, subjects: list[str], asked: list[str]) -> dict[str, set[str]]:
        """What each third party is called: the parts of its identifier, its `name`
        facts, the user's facts that name it, and a name the request gives that the
        turns about it use ("小李" in "我朋友小李住在...")."""
        out: dict[str, set[str]] = {
            s: {
                t
                for t in re.split(r"[_.:-]+", s)
                if len(t) >= 3 and t not in self.lex.patterns.titles
            }
            for s in subjects
        }
        named = [r for r in self.pool.rows if r.kind != "turn" and r.subject in out]
        names = [r for r in named if r.predicate in NAME_PREDICATES]
        for row, text in self.pool.texts([r.item_id for r in names]).items():
            if text:
                out[self.pool.by_id[row].subject].add(normalise(text))
        carriers = self._carrier_texts(named)
        for subject, text in carriers.items():
            out[subject] |= {n for n in asked if n in text}
            tokens = [t for t in re.split(r"[_.:-]+", subject) if len(t) >= 3]
            relation_values = self.pool.texts(self._relation_fact_ids())
            for value in relation_values.values():
                v = normalise(value or "")
                if len(v) >= 2 and (v in text or any(mentions(v, t) for t in tokens)):
                    out[subject].add(v)
        return out

    def _relation_fact_ids(self) -> list[str]:
        """The user's facts that name people ("朋友: 刘洋"), found once per request: a
        scan of a heavy user's 10,000 rows, asked for once per third party before."""
        if self._relation_facts is None:
            self._relation_facts = [
                r.item_id
                for r in self.pool.rows
                if r.subject == "user"
                and r.kind != "turn"
                and r.predicate in self.lex.all_relation_predicates
            ]
        return self._relation_facts

    def _carrier_texts(self, rows: list[Row]) -> dict[str, str]:
        """For each third party, the text of the turns its facts were taken from: how the
        user spoke of them ("我朋友小李住在...")."""
        if self._carriers is not None:
            return self._carriers
        sources: dict[tuple[str | None, str], set[str]] = {}
        for r in rows:
            if r.turn_id:
                sources.setdefault((r.session_id, r.turn_id), set()).add(r.subject)
        turns = [
            r for r in self.pool.rows if r.kind == "turn" and (r.session_id, r.turn_id) in sources
        ]
        out: dict[str, str] = {}
        for item_id, text in self.pool.texts([r.item_id for r in turns]).items():
            row = self.pool.by_id[item_id]
            for subject in sources[(row.session_id, row.turn_id or "")]:
                out[subject] = out.get(subject, "") + " " + normalise(text or "")
        self._carriers = out
        return out

    def _related(self, relation: str, subjects: list[str]) -> set[str]:
        """The third parties a relation word names: by identifier ("sister"), or through
        the user's own fact of that relation (user.sibling = "Kavya": kavya)."""
        words = {w for w in self.lex.relation_words.get(relation, ()) if w.isascii()}
        found = {s for s in subjects if set(re.split(r"[_.:-]+", s)) & (words | {relation})}
        facts = self.relation_facts([relation])
        carriers = self._carrier_texts(
            [r for r in self.pool.rows if r.kind != "turn" and r.subject in subjects]
        )
        for item_id, text in self.pool.texts([r.item_id for r in facts]).items():
            value = normalise(text or "")
            if not self._said_as(self.pool.by_id[item_id], value, relation):
                continue
            if len(value) >= 2:  # "王磊" is how the user's turns about wang_lei name him
                found |= {s for s in subjects if value in carriers.get(s, "")}
            found |= {
                s
                for s in subjects
                if any(mentions(value, t) for t in re.split(r"[_.:-]+", s) if len(t) >= 3)
            }
        return found

    def relation_facts(self, relations: list[str] | None = None) -> list[Row]:
        """The user's own facts of the relations named: "my wife's name" is user.spouse.
        "My partner" is the current one; "my ex", one superseded since."""
        out = []
        for relation in self.reading.relations if relations is None else relations:
            predicates = set(self.lex.relation_predicates.get(relation, ()))
            old = relation == "ex"
            out += [
                r
                for r in self.pool.rows
                if r.subject == "user"
                and r.predicate in predicates
                and (r.status == "superseded") == old
                and (relations is not None or self._said_as(r, None, relation))
            ]
        return list({r.item_id: r for r in out}.values())

    def _said_as(self, fact: Row, value: str | None, relation: str) -> bool:
        """Whether the turn a relation fact came from calls that person by this relation:
        "我儿子叫王磊...女儿王芳" makes 王芳 the daughter, not the son. Unknown: yes."""
        if value is None:
            value = normalise(self.pool.texts([fact.item_id]).get(fact.item_id) or "")
        turns = [
            r
            for r in self.pool.rows
            if r.kind == "turn" and (r.session_id, r.turn_id) == (fact.session_id, fact.turn_id)
        ]
        for text in self.pool.texts([r.item_id for r in turns]).values():
            said = normalise(text or "")
            at = said.find(value) if value else -1
            if at < 0:
                continue
            before = said[max(0, at - 12) : at]
            mine = self.lex.relation_words.get(relation, ())
            if any(mentions(before, w) for w in mine):
                return True
            general = set(self.lex.relation_predicates.get(relation, ()))
            others = [  # "my daughter Ellie" is not "my son", but is "my child"; the
                w  # stored predicate decides between relations that do not share it
                for k, ws in self.lex.relation_words.items()
                if k != relation
                and fact.predicate in self.lex.relation_predicates.get(k, ())
                and not set(self.lex.relation_predicates.get(k, ())) <= general
                for w in ws
            ]
            if any(mentions(before, w) for w in others):
                return False
        return True
