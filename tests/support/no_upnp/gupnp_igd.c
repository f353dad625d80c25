/* A stand-in for libgupnp-igd-1.0.so.4 (UPnP port mapping on a home router), for Debian 12's
   simple-whip-client only. Its libnice links libgupnp-igd, which links libgupnp-1.6 and so
   libsoup 3, while whip-client itself links libsoup 2: libsoup aborts the process at start
   ("Using libsoup2 and libsoup3 in the same process is not supported"). Port mapping has no
   use inside one machine; this library offers no mapper (NULL), which libnice takes as "no
   UPnP". The four functions are the ones libnice 0.1.21 imports (nm -D --undefined-only). */
#include <stddef.h>

void *gupnp_simple_igd_thread_new(void) { return NULL; }

unsigned long gupnp_simple_igd_get_type(void) { return 0; }

void gupnp_simple_igd_add_port(void *igd, const char *protocol, unsigned int external_port, const char *local_ip,
                               unsigned int local_port, unsigned int lease_duration, const char *description) {}

void gupnp_simple_igd_remove_port_local(void *igd, const char *protocol, const char *local_ip,
                                        unsigned int local_port) {}
