// cache-line ping-pong between two threads: round trip ns
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
static _Atomic long flag __attribute__((aligned(128)));
#define N 2000000
static void *b(void*x){for(long i=0;i<N;i++){while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+1);atomic_store_explicit(&flag,2*i+2,memory_order_release);}return 0;}
int main(){pthread_t t;pthread_create(&t,0,b,0);struct timespec s,e;clock_gettime(CLOCK_MONOTONIC,&s);
for(long i=0;i<N;i++){atomic_store_explicit(&flag,2*i+1,memory_order_release);while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+2);}
clock_gettime(CLOCK_MONOTONIC,&e);pthread_join(t,0);printf("round trip %.0f ns (one transfer ~%.0f ns)\n",((e.tv_sec-s.tv_sec)*1e9+(e.tv_nsec-s.tv_nsec))/N,((e.tv_sec-s.tv_sec)*1e9+(e.tv_nsec-s.tv_nsec))/N/2);}
