"""The load-side fuzzing harness of tools/fuzz_load.py (issue 12): seeded models compiled to .om2 and
.om, deterministic mutants and misuse cases, each run in a child process and classified.

models.py      the seeded ONNX models, compiled, with ONNX Runtime's outputs for fixed inputs
zipkit.py      the ZIP structure of an .om2: parse it, write it with any field chosen
common.py      byte flips and ELF structure edits, shared by both formats
mutate_om2.py  the .om2 mutant families
mutate_om.py   the .om mutant families
feeds.py       odd run() inputs as recipes
misuse.py      the run-time misuse families (odd inputs and arguments, races, files changed, poisoning)
child.py       what runs in the child: load + run + close, or a misuse scenario
runner.py      drawing cases from the seed, the children, classifying their ends
report.py      the table, the bad cases and their groups
"""
