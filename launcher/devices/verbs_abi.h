/* launcher/devices/verbs_abi.h — the part of libibverbs' C interface podrun calls.
 *
 * podrun builds without rdma-core's headers; these declarations follow its verbs.h. Only the
 * exported entry points are used, each at the symbol version the library exports it with:
 *   ibv_get_device_list, ibv_free_device_list, ibv_get_device_name, ibv_open_device,
 *   ibv_close_device, ibv_query_device, ibv_query_port, ibv_query_gid   IBVERBS_1.1
 *   _ibv_query_gid_ex                                                   IBVERBS_1.11
 * ibv_query_port in verbs.h is a macro over an inline function that calls the provider through
 * the context's private ops and falls back to the exported ibv_query_port. The exported function
 * takes `struct _compat_ibv_port_attr`: struct ibv_port_attr up to and including `flags`, which
 * the library clears and fills. That prefix is all podrun reads. */
#ifndef PODRUN_DEVICES_VERBS_ABI_H
#define PODRUN_DEVICES_VERBS_ABI_H

#include <stddef.h>
#include <stdint.h>

#define VERBS_VERSION "IBVERBS_1.1"
#define VERBS_VERSION_GID_EX "IBVERBS_1.11"

struct ibv_device;
struct ibv_context;

enum verbs_port_state {
    VERBS_PORT_NOP = 0,
    VERBS_PORT_DOWN = 1,
    VERBS_PORT_INIT = 2,
    VERBS_PORT_ARMED = 3,
    VERBS_PORT_ACTIVE = 4,
    VERBS_PORT_ACTIVE_DEFER = 5,
};

enum verbs_link_layer {
    VERBS_LINK_LAYER_UNSPECIFIED = 0,
    VERBS_LINK_LAYER_INFINIBAND = 1,
    VERBS_LINK_LAYER_ETHERNET = 2,
};

enum verbs_gid_type {
    VERBS_GID_TYPE_IB = 0,
    VERBS_GID_TYPE_ROCE_V1 = 1,
    VERBS_GID_TYPE_ROCE_V2 = 2,
};

/* struct _compat_ibv_port_attr */
struct verbs_port_attr {
    uint32_t state;           /* enum ibv_port_state */
    uint32_t max_mtu;         /* enum ibv_mtu */
    uint32_t active_mtu;
    int gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t max_vl_num;
    uint8_t sm_sl;
    uint8_t subnet_timeout;
    uint8_t init_type_reply;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t link_layer;
    uint8_t flags;
};

/* struct ibv_device_attr: podrun reads phys_port_cnt only. */
struct verbs_device_attr {
    char fw_ver[64];
    uint64_t node_guid;
    uint64_t sys_image_guid;
    uint64_t max_mr_size;
    uint64_t page_size_cap;
    uint32_t vendor_id;
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    int max_qp, max_qp_wr;
    unsigned int device_cap_flags;
    int max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd;
    int max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom;
    uint32_t atomic_cap;      /* enum ibv_atomic_cap */
    int max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp;
    int max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach;
    int max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr, max_srq_sge;
    uint16_t max_pkeys;
    uint8_t local_ca_ack_delay;
    uint8_t phys_port_cnt;
};

/* struct ibv_gid_entry */
struct verbs_gid_entry {
    uint8_t gid[16];
    uint32_t gid_index;
    uint32_t port_num;
    uint32_t gid_type;        /* enum ibv_gid_type */
    uint32_t ndev_ifindex;
};

typedef struct ibv_device **(*verbs_get_device_list_fn)(int *num);
typedef void (*verbs_free_device_list_fn)(struct ibv_device **list);
typedef const char *(*verbs_get_device_name_fn)(struct ibv_device *dev);
typedef struct ibv_context *(*verbs_open_device_fn)(struct ibv_device *dev);
typedef int (*verbs_close_device_fn)(struct ibv_context *ctx);
typedef int (*verbs_query_device_fn)(struct ibv_context *ctx, struct verbs_device_attr *attr);
typedef int (*verbs_query_port_fn)(struct ibv_context *ctx, uint8_t port,
                                   struct verbs_port_attr *attr);
typedef int (*verbs_query_gid_fn)(struct ibv_context *ctx, uint8_t port, int index, uint8_t gid[16]);
typedef int (*verbs_query_gid_ex_fn)(struct ibv_context *ctx, uint32_t port, uint32_t index,
                                     struct verbs_gid_entry *entry, uint32_t flags,
                                     size_t entry_size);

#endif
