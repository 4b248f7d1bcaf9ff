"""The machine: readings taken live or replayed. One reader per key (``readers/``), one provider of
every reading (``provider``), the one place NVML errors become "not available" (``nvml``), snapshots, the
platform a run judges, the run options, the binary readers (``elf``, ``fatbin``) and what the watch
samples of the host and the GPU."""
