// Purely thread-local work: snprintf + a small private hash table in L1/L2.
// Usage: spin THREADS SECONDS -> iterations/s per thread and total.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double secs;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void *run(void *arg){
  unsigned long long *out=arg, n=0, x=88172645463325252ULL; char buf[64]; unsigned tab[4096]={0};
  double end=now()+secs;
  while(1){
    for(int k=0;k<1000;k++){
      x^=x<<13;x^=x>>7;x^=x<<17;
      int l=snprintf(buf,sizeof buf,"r-%llx",x);
      unsigned h=2166136261u; for(int i=0;i<l;i++){h=(h^buf[i])*16777619u;}
      tab[h&4095]+=h; n++;
    }
    if(now()>end)break;
  }
  *out=n+tab[n&4095]*0; return 0;
}
int main(int c,char**v){int t=atoi(v[1]);secs=atof(v[2]);pthread_t th[8];unsigned long long r[8];
 for(int i=0;i<t;i++)pthread_create(&th[i],0,run,&r[i]);
 unsigned long long s=0;for(int i=0;i<t;i++){pthread_join(th[i],0);s+=r[i];}
 printf("%d %.0f\n",t,s/secs);}
