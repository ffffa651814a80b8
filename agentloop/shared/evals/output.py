"""An eval's report for people and for CI: a terminal table, and JUnit XML
(one ``testsuite``, one ``testcase`` per case, a ``failure`` with the reasons).
Pure."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from agentloop.shared.evals.report import EvalReport, Percentiles


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _measure(name: str, p: Percentiles) -> str:
    return (f"  {name:<7} p50 {_num(p.p50):>8} (recorded {_num(p.recorded_p50)})   "
            f"p95 {_num(p.p95):>8} (recorded {_num(p.recorded_p95)})")


def report_table(report: EvalReport) -> str:
    """The report as text: a line per case, then the totals."""
    rows = [("case", "result", "tools rec/live/refused", "steps", "why")]
    for o in report.cases:
        c = o.candidate
        rows.append((o.case_id, "pass" if o.passed else "FAIL", f"{c.recorded}/{c.live}/{c.refused}",
                     f"{c.steps} ({o.recorded_steps})", "; ".join(o.reasons)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)).rstrip()
             for row in rows]
    t = report.totals
    lines += [
        "",
        f"eval {report.eval_id}: {t.passed}/{t.cases} passed ({t.pass_rate:.0%})"
        + (f"; candidate: {report.candidate}" if report.candidate else ""),
        _measure("cost", t.cost_usd), _measure("tokens", t.tokens), _measure("steps", t.steps),
        f"  tool calls: {t.recorded} from the recording, {t.live} live, {t.refused} refused"
        + (f"; judges cost ${t.judge_cost_usd:.4f}" if t.judge_cost_usd else ""),
    ]
    return "\n".join(lines)


def junit_xml(report: EvalReport) -> str:
    """The report as JUnit XML: a case that failed has a ``failure`` whose
    message is its reasons; each case's run ids are its properties."""
    t = report.totals
    suites = ET.Element("testsuites", name="agentloop eval", tests=str(t.cases), failures=str(t.failed))
    suite = ET.SubElement(suites, "testsuite", name=report.eval_id, tests=str(t.cases), failures=str(t.failed),
                          errors="0", skipped="0")
    for o in report.cases:
        case = ET.SubElement(suite, "testcase", classname=report.eval_id, name=o.case_id)
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="run_id", value=o.run_id)
        if o.recorded_run_id:
            ET.SubElement(props, "property", name="recorded_run_id", value=o.recorded_run_id)
        if o.turn is not None:
            ET.SubElement(props, "property", name="turn", value=str(o.turn))
        if not o.passed:
            failure = ET.SubElement(case, "failure", message="; ".join(o.reasons)[:2000], type="EvalCaseFailed")
            failure.text = "\n".join(o.reasons)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
