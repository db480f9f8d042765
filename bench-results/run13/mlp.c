#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
char* mk(size_t n, unsigned seed){
  char*buf=mmap(0,n*64,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(buf,n*64,MADV_HUGEPAGE);
  size_t*perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i;
  srand(seed); for(size_t i=n-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1);size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
  for(size_t i=0;i<n;i++) *(char**)(buf+perm[i]*64)=buf+perm[(i+1)%n]*64;
  free(perm); return buf;
}
int main(int argc,char**argv){
  size_t n=(size_t)256*1024*1024/64;
  char*a=mk(n,1),*b=mk(n,2);
  char*p=a,*q=b; size_t iters=5000000;
  double t0=now(); for(size_t i=0;i<iters;i++)p=*(char**)p; double t1=now();
  printf("1 chain: %.1f ns/step\n",(t1-t0)/iters*1e9);
  t0=now(); for(size_t i=0;i<iters;i++){p=*(char**)p;q=*(char**)q;} t1=now();
  printf("2 chains: %.1f ns/step (%p %p)\n",(t1-t0)/iters*1e9,p,q);
  // chain + prefetch of other chain's next
  t0=now(); for(size_t i=0;i<iters;i++){__builtin_prefetch(*(char**)q); p=*(char**)p; q=*(char**)q;} t1=now();
  printf("with lock: ");
  uint64_t ctr=0; t0=now(); for(size_t i=0;i<iters;i++){p=*(char**)p;q=*(char**)q; __atomic_fetch_add((uint64_t*)p+1,1,__ATOMIC_SEQ_CST);} t1=now();
  printf("2 chains + locked add on p: %.1f ns/step\n",(t1-t0)/iters*1e9);
}
