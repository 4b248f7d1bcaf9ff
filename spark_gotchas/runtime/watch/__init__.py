"""``spark-gotchas watch``'s run: the watched job spawned and signalled (:mod:`.child`), its output copied
and read for its rate (:mod:`.stream`), the sampling loop (:mod:`.engine`), the CSV and heartbeat
(:mod:`.record`) and the plot (:mod:`.plot`). The rest lives in its layer: the states and verdicts in
:mod:`spark_gotchas.knowledge.watch_judge`, the samples of the host and GPU in
:mod:`spark_gotchas.machine.watch_host` and :mod:`~spark_gotchas.machine.watch_gpu`, the command in
:mod:`spark_gotchas.commands.watch` and its report in :mod:`spark_gotchas.outputs.watch_report`. This
package imports nothing up front.
"""
