# python3 s0.py FILE...: seed000's speedups and 1-worker rates, one row a run
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l); ph = {p['name']: p for p in r['phases']}; e = r['extra']
        print(f.split('/')[-1], "crunl %.2f (1w %.0fK) rndrename %.2f (1w %.0fK) cs/op %.4f" % (
            e['crunl speedup'], ph['crunl 1w']['ops_per_s'] / 1e3, e['rndrename speedup'], ph['rndrename 1w']['ops_per_s'] / 1e3, r['cs_per_op']))
