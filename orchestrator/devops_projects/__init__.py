"""Real upstream projects for the DevOps workspace: a catalogue pinned by registry, version and checksum
(`catalogue`), fetched and verified through each registry's own client into the state dir's cache (`fetch`), built
and tested offline through the check contract on the host or in the workspace image (`check`), one at a time with
a report per project (`run`).

Task generation over these projects (mutations, build-cause edits, hidden tests) is not here yet; it starts from
`run.pristine_tree` (the verified tree to copy) and `run.contract_meta` (the project's entry in the shape
evaluate_workspace reads).
"""
