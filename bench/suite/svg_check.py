"""The pelican's SVG: found in the answer (the first <svg ...> element, fenced or not), checked
as XML whose root is an SVG element, and rated valid, malformed, incomplete or missing. Valid
ones are saved as files the gallery shows through <img>, where scripts never run."""
import re
import xml.etree.ElementTree as ET

SVG_NS = "http://www.w3.org/2000/svg"
OPEN_RE = re.compile(r"<svg\b", re.I)
CLOSE_RE = re.compile(r"</svg\s*>", re.I)


def check_svg(answer):
    """{"status": valid|malformed|incomplete|missing, "detail": str, "svg": text or None}."""
    start_match = OPEN_RE.search(answer)
    if not start_match:
        return {"status": "missing", "detail": "the answer holds no <svg> element", "svg": None}
    start = start_match.start()
    # The last closing tag after the opening one, so nested <svg> elements stay inside.
    closes = [m for m in CLOSE_RE.finditer(answer, start)]
    if not closes:
        return {"status": "incomplete", "detail": "the <svg> element is never closed", "svg": answer[start:]}
    svg = answer[start:closes[-1].end()]
    prolog = answer[:start]
    if "<!DOCTYPE" in svg.upper() or "<!ENTITY" in svg.upper() or "<!ENTITY" in prolog.upper():
        return {"status": "malformed", "detail": "DOCTYPE or entity declarations are not accepted", "svg": svg}
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as e:
        return {"status": "malformed", "detail": f"not well-formed XML: {e}", "svg": svg}
    if root.tag not in ("svg", f"{{{SVG_NS}}}svg"):
        return {"status": "malformed", "detail": f"the root element is {root.tag}, not svg", "svg": svg}
    if root.tag == "svg":
        # Browsers render an SVG file only in the SVG namespace; a model that left out xmlns
        # drew a valid picture all the same.
        svg = re.sub(r"<svg\b", f'<svg xmlns="{SVG_NS}"', svg, count=1, flags=re.I)
        try:
            ET.fromstring(svg)
        except ET.ParseError as e:
            return {"status": "malformed", "detail": f"not well-formed XML: {e}", "svg": svg}
    return {"status": "valid", "detail": "", "svg": svg}
