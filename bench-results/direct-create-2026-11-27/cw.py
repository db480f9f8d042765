import os,sys,time
d=sys.argv[1]; n=int(sys.argv[2]); sz=int(sys.argv[3])
os.makedirs(d,exist_ok=True)
buf=b'x'*sz
t={'create':0,'write':0,'close':0}
for i in range(n):
    a=time.perf_counter(); fd=os.open(f"{d}/f{i}",os.O_CREAT|os.O_EXCL|os.O_WRONLY,0o644); b=time.perf_counter()
    if sz: os.write(fd,buf)
    c=time.perf_counter(); os.close(fd); e=time.perf_counter()
    t['create']+=b-a; t['write']+=c-b; t['close']+=e-c
print({k:round(v/n*1e6,1) for k,v in t.items()})
