import json,statistics,sys
for b in sys.argv[1]:
    rs=[json.loads(l) for l in open(f'{sys.argv[2] if len(sys.argv)>2 else "/tmp"}/nl-{b}.jsonl')]
    out=[]
    for k in ['crunl speedup','rndrename speedup','rndrename apart speedup','private speedup']:
        v=[r['extra'][k] for r in rs]; out.append(f"{k.split()[0]}{' apart' if 'apart' in k else ''} {statistics.median(v):.2f} ({min(v)}-{max(v)})")
    w={k:(sum(r['locks'].get(k,{}).get('contended',0) for r in rs)//len(rs), round(sum(r['locks'].get(k,{}).get('wait_ns',0) for r in rs)/len(rs)/1e6,1)) for k in ['dir_shard','name']}
    print(b, " | ".join(out), "cs/op %.5f"%statistics.median(r['cs_per_op'] for r in rs), w)
