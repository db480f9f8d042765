#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
int main(int argc,char**argv){ size_t mb=atol(argv[1]); int chains=atoi(argv[2]); size_t n=mb*1024*1024/64;
 char*buf=aligned_alloc(2<<20,n*64); madvise(buf,n*64,MADV_HUGEPAGE);
 size_t*perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i; srand(1);
 for(size_t i=n-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1); size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
 for(size_t i=0;i<n;i++) *(void**)(buf+perm[i]*64)=buf+perm[(i+1)%n]*64;
 void*p[8]; for(int c=0;c<8;c++) p[c]=buf+perm[c*(n/8)]*64;
 struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a); long it=10000000;
 if(chains==1) for(long i=0;i<it;i++) p[0]=*(void**)p[0];
 else if(chains==2) for(long i=0;i<it;i++){ p[0]=*(void**)p[0]; p[1]=*(void**)p[1];}
 else for(long i=0;i<it;i++){ p[0]=*(void**)p[0]; p[1]=*(void**)p[1]; p[2]=*(void**)p[2]; p[3]=*(void**)p[3];}
 clock_gettime(CLOCK_MONOTONIC,&b);
 printf("%zu MB chains=%d: %.1f ns/step %p\n",mb,chains,((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/it,p[0]);}
