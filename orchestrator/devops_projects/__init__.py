"""Real upstream projects for the DevOps workspace: a catalogue pinned by registry, version and checksum
(`catalogue`), fetched and verified through each registry's own client into the state dir's cache (`fetch`), built
and tested offline through the check contract on the host or in the workspace image (`check`), one at a time with
a report per project (`run`).

Task generation over these projects (`generate`, CLI `opsbench devops generate`): mutations of the project's own
code (`mutate`, Python by `ast`, Go by the `gomutate/` helper, Java by the JavaParser-based `javamutate/` helper)
screened against its tests (`bench`), issue texts
written from what the failing tests observed (`issue_text`), recorded tests that catch surviving mutants
(`testgen`), build causes on the real build files (`buildcfg`); every kept instance proven by `make check` on fresh
copies. It starts from `run.pristine_tree` and `run.contract_meta`.
"""
