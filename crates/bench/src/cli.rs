use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Workload: crunl, rndrename, postmark, fsmark, mdtest-hard, tree
    pub workload: String,
}

pub fn run(_a: BenchArgs) -> Result<i32, String> {
    Err("not yet".into())
}
