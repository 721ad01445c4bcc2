#!/usr/bin/env python3
"""Gives an Artemis instance's broker.xml the semantics of a rebound config.

usage: artemis_config.py REBOUND_TOML BROKER_XML ARTEMIS_XSD

Rebound's address-setting keys carry Artemis's names, so each key that Artemis's schema
(the distribution's artemis-configuration.xsd) has for an address-setting is copied as is;
the others (step schedules, outage mode, retry-after caps...) have no Artemis equivalent and
are named on stderr. The entry for "#" is merged into the one `artemis create` wrote (which
keeps Artemis's own paging and auto-create defaults) after dropping that entry's
dead-letter-address, expiry-address and redelivery-delay: rebound has none of them unless the
config sets them. `[[addresses]]` replace the DLQ and ExpiryQueue addresses `artemis create`
declares, and persist-delivery-count-before-delivery is copied to the core configuration.
"""

import re
import sys
import tomllib
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

XSD = "{http://www.w3.org/2001/XMLSchema}"
# Keys `artemis create` writes into its "#" entry that rebound leaves unset by default.
CREATED_SEMANTICS = ("dead-letter-address", "expiry-address", "redelivery-delay")
INDENT = " " * 12


def artemis_keys(xsd_path):
    """The element names an Artemis <address-setting> accepts."""
    for complex_type in ET.parse(xsd_path).getroot().iter(XSD + "complexType"):
        if complex_type.get("name") == "addressSettingType":
            return {e.get("name") for e in complex_type.find(XSD + "all").findall(XSD + "element")}
    raise SystemExit(f"artemis_config.py: no addressSettingType in {xsd_path}")


def value(key, v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if key.endswith("routing-type"):
        return str(v).upper()
    return str(v)


def elements(entry, allowed):
    """(key, text) pairs of one rebound address-setting that Artemis knows."""
    pairs = []
    for key, v in entry.items():
        if key == "match":
            continue
        if key in allowed:
            pairs.append((key, value(key, v)))
        else:
            print(f"artemis_config.py: {entry['match']!r}: {key} has no Artemis equivalent, skipped",
                  file=sys.stderr)
    return pairs


def render(pairs):
    return "".join(f"{INDENT}<{k}>{escape(v)}</{k}>\n" for k, v in pairs)


def address_xml(address):
    routing = address.get("routing-type", "anycast").lower()
    queues = ""
    for queue in address.get("queues", []):
        body = ""
        if "filter" in queue:
            body += f"<filter string={quoteattr(queue['filter'])}/>"
        if "durable" in queue:
            body += f"<durable>{value('durable', queue['durable'])}</durable>"
        queues += f"\n               <queue name={quoteattr(queue['name'])}>{body}</queue>"
    return (f"         <address name={quoteattr(address['name'])}>\n"
            f"            <{routing}>{queues}\n            </{routing}>\n         </address>\n")


def main(toml_path, xml_path, xsd_path):
    with open(toml_path, "rb") as f:
        config = tomllib.load(f)
    with open(xml_path, encoding="utf-8") as f:
        xml = f.read()
    allowed = artemis_keys(xsd_path)

    catch_all, others = [], ""
    for entry in config.get("address-settings", []):
        pairs = elements(entry, allowed)
        if entry["match"] == "#":
            catch_all = pairs
        else:
            others += f'         <address-setting match={quoteattr(entry["match"])}>\n{render(pairs)}         </address-setting>\n'

    def merge_catch_all(m):
        dropped = set(CREATED_SEMANTICS) | {k for k, _ in catch_all}
        body = "".join(line for line in m.group(2).splitlines(keepends=True)
                       if not any(line.strip().startswith(f"<{k}>") for k in dropped))
        return m.group(1) + body + render(catch_all) + m.group(3)

    xml, n = re.subn(r'(<address-setting match="#">\n)(.*?\n)([ \t]*</address-setting>)', merge_catch_all,
                     xml, count=1, flags=re.S)
    if n != 1:
        raise SystemExit(f"artemis_config.py: no <address-setting match=\"#\"> in {xml_path}")
    xml = re.sub(r"[ \t]*</address-settings>", lambda m: others + m.group(0), xml, count=1)

    addresses = "".join(address_xml(a) for a in config.get("addresses", []))
    xml, n = re.subn(r"<addresses>.*?</addresses>", lambda _: f"<addresses>\n{addresses}      </addresses>",
                     xml, count=1, flags=re.S)
    if n != 1:
        raise SystemExit(f"artemis_config.py: no <addresses> in {xml_path}")

    persist = value("", config.get("persist-delivery-count-before-delivery", False))
    xml = xml.replace("<persistence-enabled>",
                      f"<persist-delivery-count-before-delivery>{persist}</persist-delivery-count-before-delivery>\n"
                      "      <persistence-enabled>", 1)
    with open(xml_path, "w", encoding="utf-8") as f:
        f.write(xml)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
