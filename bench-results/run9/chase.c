#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
int main(int argc,char**argv){ size_t mb=atol(argv[1]); int huge=atoi(argv[2]); size_t n=mb*1024*1024/64;
 char*buf=aligned_alloc(2<<20,n*64); madvise(buf,n*64,huge?MADV_HUGEPAGE:MADV_NOHUGEPAGE);
 size_t*perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i; srand(1);
 for(size_t i=n-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1); size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
 for(size_t i=0;i<n;i++) *(void**)(buf+perm[i]*64)=buf+perm[(i+1)%n]*64;
 void*p=buf; struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a); long it=20000000;
 for(long i=0;i<it;i++) p=*(void**)p; clock_gettime(CLOCK_MONOTONIC,&b);
 printf("%zu MB huge=%d: %.1f ns/load %p\n",mb,huge,((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/it,p);}
