//! Op identity: a typed name for every operation of the op catalog.
//!
//! The catalog (`compiler/catalog/*.toml`) is the data the checker and the verifier read; this
//! enum gives the stages that must *handle* each op (the lowering, the cost model) a closed set
//! to register handlers against, as cranelift's meta crate does for opcodes. It is checked
//! against the catalog by a test (`every_catalog_op_has_an_identity`), so a catalog op without an
//! identity — one the evolution engine proposed as data — is a test failure, and the lowering
//! gate reports it unlowered.

macro_rules! op_ids {
    ($($variant:ident = $name:literal),* $(,)?) => {
        /// One catalog operation.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum OpId {
            $($variant),*
        }

        impl OpId {
            /// Every op, in catalog order.
            pub const ALL: &'static [OpId] = &[$(OpId::$variant),*];

            /// The name programs and the catalog use.
            pub fn name(self) -> &'static str {
                match self {
                    $(OpId::$variant => $name),*
                }
            }

            /// The op a catalog name denotes, if it has an identity.
            pub fn from_name(name: &str) -> Option<OpId> {
                match name {
                    $($name => Some(OpId::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

op_ids! {
    Wgmma = "wgmma",
    WgmmaCommit = "wgmma_commit",
    WgmmaWait = "wgmma_wait",
    MmaSync = "mma_sync",
    Zero = "zero",
    Fill = "fill",
    GriddepWait = "griddep_wait",
    GriddepLaunchDependents = "griddep_launch_dependents",
    Cast = "cast",
    Exp = "exp",
    Exp2 = "exp2",
    Log = "log",
    Sqrt = "sqrt",
    Rsqrt = "rsqrt",
    Abs = "abs",
    Min = "min",
    Max = "max",
    Select = "select",
    Iota = "iota",
    Fma = "fma",
    ReduceMin = "reduce_min",
    ReduceMax = "reduce_max",
    ReduceSum = "reduce_sum",
    ReduceArgmin = "reduce_argmin",
    ReduceArgmax = "reduce_argmax",
    TmaLoad = "tma_load",
    TmaStore = "tma_store",
    TmaStoreWait = "tma_store_wait",
    CpAsync = "cp_async",
    CpAsyncCommit = "cp_async_commit",
    CpAsyncWait = "cp_async_wait",
    Ldmatrix = "ldmatrix",
    Stmatrix = "stmatrix",
    Store = "store",
    AtomicAdd = "atomic_add",
    AtomicMin = "atomic_min",
    AtomicMax = "atomic_max",
    Acquire = "acquire",
    Wait = "wait",
    Release = "release",
    Arrive = "arrive",
    ArriveExpectTx = "arrive_expect_tx",
    WaitParity = "wait_parity",
    Sync = "sync",
    SyncRole = "sync_role",
    FenceProxyAsync = "fence_proxy_async",
    ClusterSync = "cluster_sync"
}

impl std::fmt::Display for OpId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
