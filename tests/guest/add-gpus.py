#!/usr/bin/env python3
"""Adds GPUs to an hwloc XML: N CUDA devices, spread evenly over the packages in order, each
behind a PCI bridge of its package (as lstopo shows real GPUs). The guest's hwloc sees no GPU;
the plugin reads this file (plugstack.conf topology=) to compute GPU locality there.

Usage: add-gpus.py IN.xml OUT.xml N
"""
import sys
import xml.etree.ElementTree as ET


def main():
    src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tree = ET.parse(src)
    packages = [o for o in tree.iter("object") if o.get("type") == "Package"]
    if not packages or count % len(packages):
        sys.exit(f"add-gpus: {count} GPUs do not spread evenly over {len(packages)} package(s)")
    gp = max(int(o.get("gp_index", 0)) for o in tree.iter("object")) + 1
    per = count // len(packages)
    for p, pkg in enumerate(packages):
        for k in range(per):
            g = p * per + k
            bus = f"{0x10 + g:02x}"
            bridge = ET.SubElement(pkg, "object", type="Bridge", gp_index=str(gp),
                                   bridge_type="0-1", depth="0", bridge_pci=f"0000:[{bus}-{bus}]")
            dev = ET.SubElement(bridge, "object", type="PCIDev", gp_index=str(gp + 1),
                                pci_busid=f"0000:{bus}:00.0",
                                pci_type="0302 [10de:20b0] [10de:134f] a1", pci_link_speed="0.000000")
            osdev = ET.SubElement(dev, "object", type="OSDev", gp_index=str(gp + 2),
                                  name=f"cuda{g}", subtype="CUDA", osdev_type="5")
            ET.SubElement(osdev, "info", name="Backend", value="CUDA")
            gp += 3
    tree.write(dst, xml_declaration=True, encoding="UTF-8")


if __name__ == "__main__":
    main()
