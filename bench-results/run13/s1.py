import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l); ph={p['name']:p for p in r['phases']}
        print(f.split('/')[-1], "1K %.2fM 1M %.2fM ratio %s" % (ph['lookup 1K']['ops_per_s']/1e6, ph['lookup']['ops_per_s']/1e6, r['extra']['lookup cost ratio']))
