// SPDX-License-Identifier: GPL-2.0
/*
 * smc-ueid: talk to Linux AF_SMC (net/smc) through its generic netlink
 * family "SMC_GEN_NETLINK", without libnl.
 *
 *   smc-ueid add EID     add a user-defined EID (needs CAP_NET_ADMIN)
 *   smc-ueid del EID     remove one user EID
 *   smc-ueid flush       remove all user EIDs
 *   smc-ueid list        print the user EID table, one EID a line
 *   smc-ueid info        print the SMC system info as "name value" lines
 *   smc-ueid stats       print the SMC statistics and fallback counters of
 *                        this network namespace as "name value" lines
 *
 * Why the bench needs it: an SMC-Rv2 connection over soft-RoCE is only
 * attempted when both hosts share an Enterprise ID. Without an ISM device
 * there is no system EID, so a user EID must be set on both hosts;
 * otherwise every AF_SMC connection silently falls back to TCP
 * (SMC_CLC_DECL_NOUEID and friends).
 *
 * The kernel (net/smc/smc_clc.c) takes an EID as exactly
 * SMC_MAX_EID_LEN (32) characters plus a NUL: upper-case letters, digits,
 * '.' and '-', starting with a letter or digit, padded with blanks. This
 * tool upper-cases and pads what it is given and rejects anything else.
 *
 * The stats names are smcr_* and smcd_* for the two SMC flavours (e.g.
 * smcr_tx_bytes: payload bytes sent by SMC-R connections), clnt_hs_err /
 * srv_hs_err (failed handshakes), fallback_clnt / fallback_srv (connections
 * that fell back to TCP) and fallback_{clnt,srv}_0xCODE (per CLC decline
 * code, see net/smc/smc_clc.h). Exit status 0 on success, 1 on a netlink
 * error (message on stderr), 2 on a usage error.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define SMC_NL_BUF	32768

struct smc_nl {
	int		fd;
	uint16_t	family;
	uint32_t	seq;
};

/* Callback for each generic netlink message of a reply. */
typedef int (*smc_nl_cb)(const struct nlattr *attrs, int len, void *arg);

static void *smc_nla_data(const struct nlattr *nla)
{
	return (char *)nla + NLA_HDRLEN;
}

static int smc_nla_len(const struct nlattr *nla)
{
	return nla->nla_len - NLA_HDRLEN;
}

#define smc_nla_for_each(nla, head, len)				\
	for (nla = (head);						\
	     (len) - ((char *)nla - (char *)(head)) >= (int)NLA_HDRLEN &&\
	     nla->nla_len >= NLA_HDRLEN &&				\
	     nla->nla_len <= (len) - ((char *)nla - (char *)(head));	\
	     nla = (const struct nlattr *)((char *)nla + NLA_ALIGN(nla->nla_len)))

static int smc_nla_type(const struct nlattr *nla)
{
	return nla->nla_type & NLA_TYPE_MASK;
}

/* Integers of any width the kernel used (u8/u16/u32/u64/uint). */
static uint64_t smc_nla_uint(const struct nlattr *nla)
{
	uint64_t v64;
	uint32_t v32;
	uint16_t v16;

	switch (smc_nla_len(nla)) {
	case 1:
		return *(uint8_t *)smc_nla_data(nla);
	case 2:
		memcpy(&v16, smc_nla_data(nla), 2);
		return v16;
	case 4:
		memcpy(&v32, smc_nla_data(nla), 4);
		return v32;
	case 8:
		memcpy(&v64, smc_nla_data(nla), 8);
		return v64;
	}
	return 0;
}

/* Append an attribute to the message in buf (nlmsg_len is updated). */
static void smc_nl_put(struct nlmsghdr *nlh, int type, const void *data, int len)
{
	struct nlattr *nla = (struct nlattr *)((char *)nlh + NLMSG_ALIGN(nlh->nlmsg_len));

	nla->nla_type = type;
	nla->nla_len = NLA_HDRLEN + len;
	memcpy(smc_nla_data(nla), data, len);
	nlh->nlmsg_len = NLMSG_ALIGN(nlh->nlmsg_len) + NLA_ALIGN(nla->nla_len);
}

static struct nlmsghdr *smc_nl_msg(void *buf, uint16_t type, uint16_t flags,
				   uint8_t cmd, uint8_t version, uint32_t seq)
{
	struct nlmsghdr *nlh = buf;
	struct genlmsghdr *g;

	memset(buf, 0, NLMSG_HDRLEN + GENL_HDRLEN);
	nlh->nlmsg_len = NLMSG_HDRLEN + GENL_HDRLEN;
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	g = (struct genlmsghdr *)((char *)buf + NLMSG_HDRLEN);
	g->cmd = cmd;
	g->version = version;
	return nlh;
}

/*
 * Send nlh and read replies until the ACK (doit) or NLMSG_DONE (dump),
 * calling cb for every data message. Returns 0 or a negative errno.
 */
static int smc_nl_talk(struct smc_nl *nl, struct nlmsghdr *nlh, smc_nl_cb cb, void *arg)
{
	static char rbuf[SMC_NL_BUF];
	bool dump = nlh->nlmsg_flags & NLM_F_DUMP;
	uint32_t seq = nlh->nlmsg_seq;
	ssize_t n;

	nlh->nlmsg_flags |= NLM_F_ACK;
	if (send(nl->fd, nlh, nlh->nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		struct nlmsghdr *h;

		n = recv(nl->fd, rbuf, sizeof(rbuf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);

				/* error 0 is the ACK of a doit request */
				if (e->error || !dump)
					return e->error;
				continue;
			}
			if (cb) {
				int len = h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
				int rc;

				rc = cb((struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN),
					len, arg);
				if (rc)
					return rc;
			}
		}
	}
}

static int smc_nl_family_cb(const struct nlattr *attrs, int len, void *arg)
{
	const struct nlattr *nla;

	smc_nla_for_each(nla, attrs, len) {
		if (smc_nla_type(nla) == CTRL_ATTR_FAMILY_ID)
			*(uint16_t *)arg = smc_nla_uint(nla);
	}
	return 0;
}

static int smc_nl_open(struct smc_nl *nl)
{
	char buf[256];
	struct nlmsghdr *nlh;
	int rc;

	nl->seq = 1;
	nl->family = 0;
	nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl->fd < 0) {
		fprintf(stderr, "smc-ueid: netlink socket: %s\n", strerror(errno));
		return -1;
	}
	nlh = smc_nl_msg(buf, GENL_ID_CTRL, 0, CTRL_CMD_GETFAMILY, 1, nl->seq++);
	smc_nl_put(nlh, CTRL_ATTR_FAMILY_NAME, SMC_GENL_FAMILY_NAME,
		   sizeof(SMC_GENL_FAMILY_NAME));
	rc = smc_nl_talk(nl, nlh, smc_nl_family_cb, &nl->family);
	if (rc || !nl->family) {
		fprintf(stderr,
			"smc-ueid: generic netlink family %s not found (%s): is the smc module loaded?\n",
			SMC_GENL_FAMILY_NAME, rc ? strerror(-rc) : "no id");
		return -1;
	}
	return 0;
}

/* Upper-case, validate (as smc_clc_ueid_valid() does) and blank-pad. */
static int smc_eid_normalize(const char *in, char out[SMC_MAX_EID_LEN + 1])
{
	size_t len = strlen(in), i;

	while (len && in[len - 1] == ' ')
		len--;
	if (!len || len > SMC_MAX_EID_LEN) {
		fprintf(stderr, "smc-ueid: an EID has 1 to %d characters\n", SMC_MAX_EID_LEN);
		return -1;
	}
	for (i = 0; i < len; i++) {
		char c = toupper((unsigned char)in[i]);

		if (!isalnum((unsigned char)c) && (i == 0 || (c != '.' && c != '-'))) {
			fprintf(stderr,
				"smc-ueid: invalid EID '%s': letters, digits, '.' and '-', first a letter or digit\n",
				in);
			return -1;
		}
		out[i] = c;
	}
	memset(out + len, ' ', SMC_MAX_EID_LEN - len);
	out[SMC_MAX_EID_LEN] = '\0';
	return 0;
}

static int smc_cmd_eid(struct smc_nl *nl, int cmd, const char *eid)
{
	char buf[256], ueid[SMC_MAX_EID_LEN + 1];
	struct nlmsghdr *nlh;
	int rc;

	nlh = smc_nl_msg(buf, nl->family, 0, cmd, SMC_GENL_FAMILY_VERSION, nl->seq++);
	if (eid) {
		if (smc_eid_normalize(eid, ueid))
			return 2;
		/* the kernel wants exactly 32 characters and the NUL */
		smc_nl_put(nlh, SMC_NLA_EID_TABLE_ENTRY, ueid, sizeof(ueid));
	}
	rc = smc_nl_talk(nl, nlh, NULL, NULL);
	/* adding an EID that is already there is not an error for us */
	if (cmd == SMC_NETLINK_ADD_UEID && rc == -EEXIST)
		rc = 0;
	if (rc) {
		fprintf(stderr, "smc-ueid: command %d failed: %s\n", cmd, strerror(-rc));
		return 1;
	}
	return 0;
}

static int smc_list_cb(const struct nlattr *attrs, int len, void *arg)
{
	const struct nlattr *nla;

	(void)arg;
	smc_nla_for_each(nla, attrs, len) {
		char eid[SMC_MAX_EID_LEN + 1];
		int n;

		if (smc_nla_type(nla) != SMC_NLA_EID_TABLE_ENTRY)
			continue;
		n = smc_nla_len(nla);
		if (n > SMC_MAX_EID_LEN)
			n = SMC_MAX_EID_LEN;
		memcpy(eid, smc_nla_data(nla), n);
		eid[n] = '\0';
		while (n && (eid[n - 1] == ' ' || eid[n - 1] == '\0'))
			eid[--n] = '\0';
		printf("%s\n", eid);
	}
	return 0;
}

/* SMC_GEN_SYS_INFO's attributes this tool prints, and how: number or text */
static const struct {
	const char *name;
	bool text;
} smc_sys_attrs[] = {
	[SMC_NLA_SYS_VER]		= { "version" },
	[SMC_NLA_SYS_REL]		= { "release" },
	[SMC_NLA_SYS_IS_ISM_V2]		= { "ism_v2" },
	[SMC_NLA_SYS_IS_SMCR_V2]	= { "smcr_v2" },
	[SMC_NLA_SYS_LOCAL_HOST]	= { "local_host", true },
	[SMC_NLA_SYS_SEID]		= { "seid", true },
};

static int smc_info_cb(const struct nlattr *attrs, int len, void *arg)
{
	const struct nlattr *top, *nla;
	unsigned int type;

	(void)arg;
	smc_nla_for_each(top, attrs, len) {
		if (smc_nla_type(top) != SMC_GEN_SYS_INFO)
			continue;
		smc_nla_for_each(nla, (const struct nlattr *)smc_nla_data(top), smc_nla_len(top)) {
			type = smc_nla_type(nla);
			if (type >= sizeof(smc_sys_attrs) / sizeof(smc_sys_attrs[0]) ||
			    !smc_sys_attrs[type].name)
				continue;
			if (smc_sys_attrs[type].text)
				printf("%s %.*s\n", smc_sys_attrs[type].name,
				       smc_nla_len(nla), (char *)smc_nla_data(nla));
			else
				printf("%s %llu\n", smc_sys_attrs[type].name,
				       (unsigned long long)smc_nla_uint(nla));
		}
	}
	return 0;
}

static const char *const smc_tech_names[] = {
	[SMC_NLA_STATS_T_CLNT_V1_SUCC] = "clnt_v1_succ",
	[SMC_NLA_STATS_T_CLNT_V2_SUCC] = "clnt_v2_succ",
	[SMC_NLA_STATS_T_SRV_V1_SUCC] = "srv_v1_succ",
	[SMC_NLA_STATS_T_SRV_V2_SUCC] = "srv_v2_succ",
	[SMC_NLA_STATS_T_SENDPAGE_CNT] = "sendpage_cnt",
	[SMC_NLA_STATS_T_SPLICE_CNT] = "splice_cnt",
	[SMC_NLA_STATS_T_CORK_CNT] = "cork_cnt",
	[SMC_NLA_STATS_T_NDLY_CNT] = "ndly_cnt",
	[SMC_NLA_STATS_T_URG_DATA_CNT] = "urg_data_cnt",
	[SMC_NLA_STATS_T_RX_BYTES] = "rx_bytes",
	[SMC_NLA_STATS_T_TX_BYTES] = "tx_bytes",
	[SMC_NLA_STATS_T_RX_CNT] = "rx_cnt",
	[SMC_NLA_STATS_T_TX_CNT] = "tx_cnt",
};

static int smc_stats_cb(const struct nlattr *attrs, int len, void *arg)
{
	const struct nlattr *top, *grp, *nla;

	(void)arg;
	smc_nla_for_each(top, attrs, len) {
		if (smc_nla_type(top) != SMC_GEN_STATS)
			continue;
		smc_nla_for_each(grp, (const struct nlattr *)smc_nla_data(top), smc_nla_len(top)) {
			const char *tech = NULL;
			int t = smc_nla_type(grp);

			if (t == SMC_NLA_STATS_CLNT_HS_ERR_CNT)
				printf("clnt_hs_err %llu\n", (unsigned long long)smc_nla_uint(grp));
			else if (t == SMC_NLA_STATS_SRV_HS_ERR_CNT)
				printf("srv_hs_err %llu\n", (unsigned long long)smc_nla_uint(grp));
			else if (t == SMC_NLA_STATS_SMCR_TECH)
				tech = "smcr";
			else if (t == SMC_NLA_STATS_SMCD_TECH)
				tech = "smcd";
			if (!tech)
				continue;
			smc_nla_for_each(nla, (const struct nlattr *)smc_nla_data(grp),
					 smc_nla_len(grp)) {
				unsigned int k = smc_nla_type(nla);

				/* nested size histograms are left out */
				if (k < ARRAY_SIZE(smc_tech_names) &&
				    smc_tech_names[k])
					printf("%s_%s %llu\n", tech, smc_tech_names[k],
					       (unsigned long long)smc_nla_uint(nla));
			}
		}
	}
	return 0;
}

struct smc_fback {
	uint64_t	srv_cnt, clnt_cnt;
	bool		have_cnt;
};

static int smc_fback_cb(const struct nlattr *attrs, int len, void *arg)
{
	const struct nlattr *top, *nla;
	struct smc_fback *fb = arg;

	smc_nla_for_each(top, attrs, len) {
		uint64_t code = 0, cnt = 0;
		bool srv = false, have_code = false;

		if (smc_nla_type(top) != SMC_GEN_FBACK_STATS)
			continue;
		smc_nla_for_each(nla, (const struct nlattr *)smc_nla_data(top), smc_nla_len(top)) {
			switch (smc_nla_type(nla)) {
			case SMC_NLA_FBACK_STATS_TYPE:
				srv = smc_nla_uint(nla);
				break;
			case SMC_NLA_FBACK_STATS_SRV_CNT:
				fb->srv_cnt = smc_nla_uint(nla);
				fb->have_cnt = true;
				break;
			case SMC_NLA_FBACK_STATS_CLNT_CNT:
				fb->clnt_cnt = smc_nla_uint(nla);
				fb->have_cnt = true;
				break;
			case SMC_NLA_FBACK_STATS_RSN_CODE:
				code = smc_nla_uint(nla);
				have_code = true;
				break;
			case SMC_NLA_FBACK_STATS_RSN_CNT:
				cnt = smc_nla_uint(nla);
				break;
			}
		}
		if (have_code)
			printf("fallback_%s_0x%08llx %llu\n", srv ? "srv" : "clnt",
			       (unsigned long long)code, (unsigned long long)cnt);
	}
	return 0;
}

static int smc_dump(struct smc_nl *nl, int cmd, smc_nl_cb cb, void *arg)
{
	char buf[64];
	struct nlmsghdr *nlh;
	int rc;

	nlh = smc_nl_msg(buf, nl->family, NLM_F_DUMP, cmd, SMC_GENL_FAMILY_VERSION, nl->seq++);
	rc = smc_nl_talk(nl, nlh, cb, arg);
	if (rc) {
		fprintf(stderr, "smc-ueid: dump %d failed: %s\n", cmd, strerror(-rc));
		return 1;
	}
	return 0;
}

static void smc_usage(void)
{
	fprintf(stderr,
		"usage: smc-ueid add EID | del EID | flush | list | info | stats\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct smc_fback fb = { 0 };
	struct smc_nl nl;
	const char *cmd;
	int rc;

	if (argc < 2)
		smc_usage();
	cmd = argv[1];
	if ((!strcmp(cmd, "add") || !strcmp(cmd, "del")) ? argc != 3 : argc != 2)
		smc_usage();
	if (strcmp(cmd, "add") && strcmp(cmd, "del") && strcmp(cmd, "flush") &&
	    strcmp(cmd, "list") && strcmp(cmd, "info") && strcmp(cmd, "stats"))
		smc_usage();
	if (smc_nl_open(&nl))
		return 1;

	if (!strcmp(cmd, "add"))
		return smc_cmd_eid(&nl, SMC_NETLINK_ADD_UEID, argv[2]);
	if (!strcmp(cmd, "del"))
		return smc_cmd_eid(&nl, SMC_NETLINK_REMOVE_UEID, argv[2]);
	if (!strcmp(cmd, "flush"))
		return smc_cmd_eid(&nl, SMC_NETLINK_FLUSH_UEID, NULL);
	if (!strcmp(cmd, "list"))
		return smc_dump(&nl, SMC_NETLINK_DUMP_UEID, smc_list_cb, NULL);
	if (!strcmp(cmd, "info"))
		return smc_dump(&nl, SMC_NETLINK_GET_SYS_INFO, smc_info_cb, NULL);

	rc = smc_dump(&nl, SMC_NETLINK_GET_STATS, smc_stats_cb, NULL);
	rc |= smc_dump(&nl, SMC_NETLINK_GET_FBACK_STATS, smc_fback_cb, &fb);
	/* the totals only come with the first reason code: none means 0 */
	printf("fallback_srv %llu\nfallback_clnt %llu\n",
	       (unsigned long long)fb.srv_cnt, (unsigned long long)fb.clnt_cnt);
	return rc;
}
