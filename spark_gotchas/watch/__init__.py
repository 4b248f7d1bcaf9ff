"""``spark-gotchas watch``: the user's own training run watched as it runs, and judged for G3, G4 and G6.

Layered as the rest of the suite (docs/architecture.md): the rules (:mod:`.judge`, pure, calling the
preflight's judges); the readings of the machine (:mod:`.host`, :mod:`.gpu`); the run (:mod:`.child`,
:mod:`.stream`, :mod:`.engine`, :mod:`.record`, :mod:`.plot`); the command and its report on top
(:mod:`.command`, :mod:`.report`). This package imports nothing up front.
"""
