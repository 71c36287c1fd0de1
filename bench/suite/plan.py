"""Which samples a run takes and in what order: the selection (mode presets, --cases, --configs,
--rounds), the rotation of settings between rounds, and pelicans last."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError

MODES = ("light", "heavy")


@dataclass(frozen=True)
class PlannedSample:
    id: str
    round: int
    case: str
    config: str


@dataclass
class Selection:
    mode: str | None
    cases: list
    configs: list
    rounds: int
    skipped_configs: dict  # setting name -> why light mode left it out

    def as_dict(self):
        return {"mode": self.mode, "cases": self.cases, "configs": self.configs, "rounds": self.rounds}


def _names(flag, given, known):
    names = [n.strip() for n in given.split(",") if n.strip()]
    if not names:
        raise UsageError(f"{flag}: names nothing")
    for name in names:
        if name not in known:
            raise UsageError(f"{flag}: unknown name {name!r} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise UsageError(f"{flag}: a name is given twice")
    return names


def select(suite, mode, cases_flag, configs_flag, rounds_flag, present_tables):
    """The run's selection. `present_tables` is the set of expert precisions the store has
    built (light mode keeps only the settings they serve); explicit flags override a preset."""
    if mode is not None and mode not in MODES:
        raise UsageError(f"--mode: must be light or heavy, not {mode!r}")
    case_names = [c.name for c in suite.cases]
    config_names = [c.name for c in suite.configs]
    skipped = {}
    if mode == "light":
        if not suite.light["cases"]:
            raise UsageError(f"--mode light: the suite {suite.path.name} defines no light preset")
        cases, rounds = list(suite.light["cases"]), suite.light["rounds"]
        configs = []
        for config in suite.configs:
            missing = [b for b in config.expert_tables() if b not in present_tables]
            if missing:
                skipped[config.name] = "no Q" + "/Q".join(map(str, missing)) + " table built"
            else:
                configs.append(config.name)
    else:
        cases, configs, rounds = case_names, config_names, suite.rounds
    if cases_flag is not None:
        cases = _names("--cases", cases_flag, case_names)
    if configs_flag is not None:
        configs, skipped = _names("--configs", configs_flag, config_names), {}
    if rounds_flag is not None:
        rounds = rounds_flag
    if not configs:
        raise UsageError("no setting left to run: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    # Keep the suite's order whatever order the flags gave.
    cases = [n for n in case_names if n in cases]
    configs = [n for n in config_names if n in configs]
    return Selection(mode=mode, cases=cases, configs=configs, rounds=rounds, skipped_configs=skipped)


def plan(suite, selection):
    """Samples in run order. Each round runs every selected workload once per setting, the
    settings rotated by one place per round so none always runs first; a case with `rounds`
    runs only in the first that many rounds; pelicans run after every round."""
    samples = []
    configs = selection.configs
    regular = [suite.case(n) for n in selection.cases if suite.case(n).kind != "pelican"]
    pelicans = [suite.case(n) for n in selection.cases if suite.case(n).kind == "pelican"]
    for round_number in range(1, selection.rounds + 1):
        shift = (round_number - 1) % len(configs)
        order = configs[shift:] + configs[:shift]
        for case in regular:
            if case.rounds is not None and round_number > case.rounds:
                continue
            for config in order:
                samples.append(PlannedSample(f"r{round_number}-{case.name}-{config}", round_number, case.name, config))
    for case in pelicans:
        for round_number in range(1, min(case.rounds or 1, selection.rounds) + 1):
            for config in configs:
                samples.append(PlannedSample(f"r{round_number}-{case.name}-{config}", round_number, case.name, config))
    return samples
