/* DPDK's librte_gro measured alone, the counterpart of core/nodes/benches/gro.rs
 * (ironpath's aggregator) for ci/bench-gro: a pcap is loaded into memory once;
 * in a loop each burst is copied into fresh mbufs (not timed), aggregated (timed
 * with the TSC) and the outputs freed (not timed).
 *
 *   gro_dpdk EAL-ARGS -- --pcap FILE --mode gro|off [--flush burst|timeout]
 *            [--timeout-us U] [--dur S] [--warmup S] [--burst B] [--flows N]
 *            [--no-csum-offload]
 *
 * gro, flush burst:   rte_gro_reassemble_burst(pkts, B, {TCP_IPV4, max_flow_num B,
 *                     max_item_per_flow B}) (everything leaves every call)
 * gro, flush timeout: rte_gro_reassemble(pkts, B, ctx) + rte_gro_timeout_flush(ctx,
 *                     timeout, ...) every burst, ctx of max_flow_num = flows,
 *                     max_item_per_flow = 64 / flows (at least 2)
 * off:                times the refill and free instead (nothing in between).
 *
 * librte_gro needs packet_type and l2_len/l3_len/l4_len (a PMD's Rx classification);
 * the refill sets them, and the checksum-good flags a NIC would set (GRO ignores
 * them). The capture is read with a tiny pcap reader (classic format, no libpcap).
 * Prints one line "RESULT key=value ..." like the Rust side.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_gro.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#define MAX_BURST 256
#define FLUSH_OUT 8192

struct frame {
	const uint8_t *data;
	uint32_t len;
};

static void die(const char *msg)
{
	fprintf(stderr, "gro_dpdk: %s\n", msg);
	exit(1);
}

/* Classic pcap (micro- or nanosecond magic, either byte order) into memory. */
static struct frame *load_pcap(const char *path, size_t *n_out)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "gro_dpdk: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(size);
	if (!buf || fread(buf, 1, size, f) != (size_t)size)
		die("cannot read the capture");
	fclose(f);
	if (size < 24)
		die("capture shorter than a pcap header");
	uint32_t magic;
	memcpy(&magic, buf, 4);
	int swap;
	if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d)
		swap = 0;
	else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1)
		swap = 1;
	else
		die("not a classic pcap file");
	size_t cap = 1024, n = 0;
	struct frame *fr = malloc(cap * sizeof(*fr));
	long off = 24;
	while (off + 16 <= size) {
		uint32_t incl;
		memcpy(&incl, buf + off + 8, 4);
		if (swap)
			incl = __builtin_bswap32(incl);
		if (off + 16 + (long)incl > size)
			die("truncated record");
		if (n == cap) {
			cap *= 2;
			fr = realloc(fr, cap * sizeof(*fr));
		}
		fr[n].data = buf + off + 16;
		fr[n].len = incl;
		n++;
		off += 16 + incl;
	}
	if (n == 0)
		die("no packets in the capture");
	*n_out = n;
	return fr;
}

/* Header lengths of an Ethernet/IPv4/TCP frame (0 if it is not one). */
static void lengths(const uint8_t *d, uint32_t len, uint8_t *l2, uint8_t *l3, uint8_t *l4)
{
	*l2 = *l3 = *l4 = 0;
	if (len < 54 || d[12] != 0x08 || d[13] != 0x00 || d[23] != 6)
		return;
	*l2 = 14;
	*l3 = (d[14] & 0x0f) * 4;
	*l4 = (d[14 + *l3 + 12] >> 4) * 4;
}

struct opts {
	const char *pcap;
	int gro;           /* 1 gro, 0 off */
	int timeout_mode;  /* flush timeout */
	double timeout_us, dur, warmup;
	unsigned burst, flows;
	int offload;
};

static void refill(struct rte_mempool *mp, struct rte_mbuf **pkts, const struct frame *fr,
		   const uint8_t (*lens)[3], size_t nfr, size_t *pos, unsigned n, int offload)
{
	if (rte_pktmbuf_alloc_bulk(mp, pkts, n) != 0)
		die("mbuf pool empty");
	for (unsigned i = 0; i < n; i++) {
		const struct frame *f = &fr[*pos];
		const uint8_t *l = lens[*pos];
		*pos = *pos + 1 == nfr ? 0 : *pos + 1;
		struct rte_mbuf *m = pkts[i];
		memcpy(rte_pktmbuf_mtod(m, void *), f->data, f->len);
		m->data_len = f->len;
		m->pkt_len = f->len;
		m->ol_flags = offload ? RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD : 0;
		m->packet_type = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4 | RTE_PTYPE_L4_TCP;
		m->l2_len = l[0];
		m->l3_len = l[1];
		m->l4_len = l[2];
	}
}

int main(int argc, char **argv)
{
	int ret = rte_eal_init(argc, argv);
	if (ret < 0)
		die("rte_eal_init failed");
	argc -= ret;
	argv += ret;
	struct opts o = {NULL, 1, 0, 500.0, 2.0, 0.3, 32, 1, 1};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-csum-offload")) {
			o.offload = 0;
			continue;
		}
		if (!v)
			die("missing value (see the usage at the top of gro_dpdk.c)");
		i++;
		if (!strcmp(a, "--pcap"))
			o.pcap = v;
		else if (!strcmp(a, "--mode")) {
			if (!strcmp(v, "gro"))
				o.gro = 1;
			else if (!strcmp(v, "off"))
				o.gro = 0;
			else
				die("--mode: gro or off");
		} else if (!strcmp(a, "--flush")) {
			if (!strcmp(v, "burst"))
				o.timeout_mode = 0;
			else if (!strcmp(v, "timeout"))
				o.timeout_mode = 1;
			else
				die("--flush: burst or timeout");
		} else if (!strcmp(a, "--timeout-us"))
			o.timeout_us = atof(v);
		else if (!strcmp(a, "--dur"))
			o.dur = atof(v);
		else if (!strcmp(a, "--warmup"))
			o.warmup = atof(v);
		else if (!strcmp(a, "--burst"))
			o.burst = atoi(v);
		else if (!strcmp(a, "--flows"))
			o.flows = atoi(v);
		else
			die("unknown option (see the usage at the top of gro_dpdk.c)");
	}
	if (!o.pcap)
		die("--pcap FILE is required");
	if (o.burst < 1 || o.burst > MAX_BURST)
		die("--burst: 1..256");

	size_t nfr;
	struct frame *fr = load_pcap(o.pcap, &nfr);
	uint8_t(*lens)[3] = malloc(nfr * sizeof(*lens));
	for (size_t i = 0; i < nfr; i++) {
		lengths(fr[i].data, fr[i].len, &lens[i][0], &lens[i][1], &lens[i][2]);
		if (fr[i].len > RTE_MBUF_DEFAULT_DATAROOM)
			die("frame larger than an mbuf");
	}

	struct rte_mempool *mp = rte_pktmbuf_pool_create("gro_bench", 32767, 256, 0,
							 RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
	if (!mp)
		die("rte_pktmbuf_pool_create failed");

	struct rte_gro_param param = {
		.gro_types = RTE_GRO_TCP_IPV4,
		.max_flow_num = o.burst,
		.max_item_per_flow = o.burst,
		.socket_id = rte_socket_id(),
	};
	void *ctx = NULL;
	if (o.gro && o.timeout_mode) {
		/* Items sized to the traffic: rte_gro_timeout_flush scans every item of
		 * the table on each call, so 1024 flows x 64 items would cost ~10^4 cycles
		 * per packet; in-order flows need about one item each. */
		param.max_flow_num = o.flows;
		param.max_item_per_flow = o.flows >= 32 ? 2 : 64 / o.flows;
		ctx = rte_gro_ctx_create(&param);
		if (!ctx)
			die("rte_gro_ctx_create failed");
	}
	uint64_t hz = rte_get_tsc_hz();
	uint64_t timeout = (uint64_t)(o.timeout_us * hz / 1e6);
	static struct rte_mbuf *pkts[MAX_BURST], *out[FLUSH_OUT];
	size_t pos = 0;
	uint64_t pkts_in = 0, pkts_out = 0, bursts = 0, cycles = 0, skipped = 0;
	double phases[2] = {o.warmup, o.dur};
	for (int ph = 0; ph < 2; ph++) {
		pkts_in = pkts_out = bursts = cycles = skipped = 0;
		uint64_t end = rte_rdtsc() + (uint64_t)(phases[ph] * hz);
		while (rte_rdtsc() < end) {
			uint64_t t0, t1;
			unsigned n = o.burst, nout = 0;
			if (!o.gro) {
				t0 = rte_rdtsc();
				refill(mp, pkts, fr, (const uint8_t(*)[3])lens, nfr, &pos, n, o.offload);
				rte_pktmbuf_free_bulk(pkts, n);
				t1 = rte_rdtsc();
			} else if (!ctx) {
				refill(mp, pkts, fr, (const uint8_t(*)[3])lens, nfr, &pos, n, o.offload);
				t0 = rte_rdtsc();
				n = rte_gro_reassemble_burst(pkts, n, &param);
				t1 = rte_rdtsc();
				rte_pktmbuf_free_bulk(pkts, n);
			} else {
				refill(mp, pkts, fr, (const uint8_t(*)[3])lens, nfr, &pos, n, o.offload);
				t0 = rte_rdtsc();
				n = rte_gro_reassemble(pkts, n, ctx);
				nout = rte_gro_timeout_flush(ctx, timeout, RTE_GRO_TCP_IPV4, out, FLUSH_OUT);
				t1 = rte_rdtsc();
				rte_pktmbuf_free_bulk(pkts, n);
				rte_pktmbuf_free_bulk(out, nout);
			}
			/* A burst whose timed part took over a millisecond was descheduled
			 * (the loop normally takes microseconds): not counted, as on the
			 * Rust side. */
			if (t1 - t0 > hz / 1000) {
				skipped++;
				continue;
			}
			cycles += t1 - t0;
			pkts_in += o.burst;
			pkts_out += n + nout;
			bursts++;
		}
		if (ctx && ph == 0) {
			/* Empty the table between warm-up and measurement. */
			unsigned k;
			while ((k = rte_gro_timeout_flush(ctx, 0, RTE_GRO_TCP_IPV4, out, FLUSH_OUT)) > 0)
				rte_pktmbuf_free_bulk(out, k);
		}
	}
	double cpp = (double)cycles / (double)(pkts_in ? pkts_in : 1);
	printf("RESULT side=dpdk mode=%s flush=%s flows=%u burst=%u pkts_in=%lu pkts_out=%lu bursts=%lu "
	       "skipped=%lu cycles=%lu hz=%lu cycles_per_pkt=%.2f mpps=%.3f out_per_in=%.4f held=%lu\n",
	       o.gro ? "gro" : "off", o.timeout_mode ? "timeout" : "burst", o.flows, o.burst,
	       (unsigned long)pkts_in, (unsigned long)pkts_out, (unsigned long)bursts, (unsigned long)skipped,
	       (unsigned long)cycles, (unsigned long)hz, cpp, hz / cpp / 1e6,
	       (double)pkts_out / (double)(pkts_in ? pkts_in : 1),
	       (unsigned long)(ctx ? rte_gro_get_pkt_count(ctx) : 0));
	if (ctx)
		rte_gro_ctx_destroy(ctx);
	rte_eal_cleanup();
	return 0;
}
