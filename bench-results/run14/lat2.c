#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t mb=atol(argv[1]); size_t n=mb*1024*1024/64;
  char*buf=mmap(0,n*64,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  if(getenv("NOHP"))madvise(buf,n*64,MADV_NOHUGEPAGE); else madvise(buf,n*64,MADV_HUGEPAGE);
  size_t*perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i;
  srand(1); for(size_t i=n-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1);size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
  for(size_t i=0;i<n;i++) *(char**)(buf+perm[i]*64)=buf+perm[(i+1)%n]*64;
  char*p=buf; size_t iters=5000000; for(size_t i=0;i<iters/10;i++)p=*(char**)p;
  double t0=now(); for(size_t i=0;i<iters;i++)p=*(char**)p; double t1=now();
  printf("%zu MB: %.1f ns per dependent load (%p)\n",mb,(t1-t0)/iters*1e9,p);
}
