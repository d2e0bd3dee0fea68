//! The real thing: PyPI CUDA torch wheels (fetched on first use by fixtures/corpus/fetch).
//! Three layouts, one code path: 2.11 (lazy library, static MAGMA), 1.13 (lazy library loaded by a
//! split libtorch_cuda_cu.so), 1.10 (no lazy library, MAGMA in libtorch_cuda.so).

use crate::common::*;

fn plan(path: &std::path::Path) -> serde_json::Value {
    let o = run_path(&["plan", "--json", "--quiet"], path);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let p = json(&o);
    assert_valid("docs/plan.schema.json", &p);
    p
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_2_11_wheel_and_tree_are_confined() {
    let (wheel, tree) = corpus("torch-2.11.0-cu130", true);
    let tree = tree.unwrap();
    for (p, prefix) in [(plan(&tree), ""), (plan(&wheel), "torch/")] {
        assert_torch_2_11_plan(&p, prefix);
    }
    assert_torch_2_11_lazy_edges(&tree);
}

/// torch 2.11's plan (of the tree, or of the wheel with `prefix` `torch/`): confined, the lazy
/// library loaded by libtorch_cuda.so's rpath, MAGMA static in it and only there (the estimate
/// and device code), and the has_magma glue warned about.
fn assert_torch_2_11_plan(p: &serde_json::Value, prefix: &str) {
    assert_eq!(p["verdict"], "confined", "{:#}", p["reasons"]);
    let lazy = &p["lazy_library"];
    assert_eq!(lazy["path"], format!("{prefix}lib/libtorch_cuda_linalg.so"));
    assert_eq!(lazy["size"], 53_532_193);
    let by = &lazy["loaded_by"][0];
    assert_eq!(by["from"], format!("{prefix}lib/libtorch_cuda.so"));
    assert_eq!(by["kind"], "lazy");
    assert_eq!(
        by["how"],
        format!("rpath of libtorch_cuda.so ($ORIGIN → {prefix}lib)")
    );
    // MAGMA is static in the lazy library, and only there.
    let files = p["payload"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["form"], "static");
    assert_eq!(
        files[0]["path"],
        format!("{prefix}lib/libtorch_cuda_linalg.so")
    );
    let est = files[0]["estimate"]["bytes"].as_u64().unwrap();
    // The notes measured ~48-50 MB of 53.5 MB as MAGMA; the estimate must land near that.
    assert!((45_000_000..53_000_000).contains(&est), "estimate {est}");
    let fatbin = files[0]["estimate"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["what"] == ".nv_fatbin")
        .unwrap();
    assert_eq!(
        fatbin["bytes"], 35_280_792,
        "all device code of the linalg library is MAGMA"
    );
    // Device code: three libraries; the linalg library's is all MAGMA; the CUDA 13 runtime's
    // driver floor (580) is above what zstd needs (550.54.14), so no extra constraint.
    let d = &p["device_code"];
    assert_eq!(d["libraries"], 3);
    assert_eq!(d["stored"], 297_806_224u64 + 35_280_792 + 453_568);
    assert_eq!(d["compression"], serde_json::json!(["zstd"]));
    assert_eq!(d["driver_minimum"], "580");
    assert_eq!(d["compression_raises_floor"], false);
    assert_eq!(p["payload"]["device_code"], 35_280_792);
    let lazy_out = lazy_output(p);
    assert_eq!(lazy_out["device_code"], 35_280_792);
    // libtorch_cuda.so keeps the has_magma glue.
    assert!(p["warnings"].as_array().unwrap().iter().any(|w| {
        w["file"] == format!("{prefix}lib/libtorch_cuda.so")
            && w["examples"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e.as_str().unwrap().contains("set_magma_init_fn"))
    }));
}

/// libtorch_cuda.so's other lazy names in the tree are lazy system / external edges, and the CUDA
/// runtime wheels sit outside the tree (the search path says so).
fn assert_torch_2_11_lazy_edges(tree: &std::path::Path) {
    // libtorch_cuda.so's other lazy names are lazy system / external edges.
    let o = run_path(&["inspect", "--json", "--quiet"], tree);
    let ins = json(&o);
    let nodes = ins["nodes"].as_array().unwrap();
    let lazy_from_cuda: Vec<(String, String, String)> = ins["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["kind"] == "lazy"
                && nodes[e["from"].as_u64().unwrap() as usize]["name"] == "lib/libtorch_cuda.so"
        })
        .map(|e| {
            let to = &nodes[e["to"].as_u64().unwrap() as usize];
            (
                e["name"].as_str().unwrap().to_string(),
                to["kind"].as_str().unwrap().to_string(),
                e["how"]["via"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for want in [
        ("libcuda.so.1", "system", "system"),
        ("libnvidia-ml.so.1", "system", "system"),
        ("libibverbs.so.1", "external", "not-found"),
        ("libtorch_cuda_linalg.so", "file", "rpath"),
    ] {
        let want = (want.0.to_string(), want.1.to_string(), want.2.to_string());
        assert!(
            lazy_from_cuda.contains(&want),
            "{want:?} not in {lazy_from_cuda:?}"
        );
    }
    // The CUDA runtime wheels sit outside the tree; the search path says so.
    let cublas = ins["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "libcublas.so.13")
        .unwrap();
    assert_eq!(cublas["how"]["via"], "not-found");
    assert!(
        cublas["how"]["outside"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "$ORIGIN/../../nvidia/cu13/lib")
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_1_13_split_cuda_library_is_confined() {
    let (wheel, _) = corpus("torch-1.13.1-cu117", false);
    let p = plan(&wheel);
    assert_eq!(p["verdict"], "confined", "{:#}", p["reasons"]);
    assert_eq!(
        p["lazy_library"]["loaded_by"][0]["from"],
        "torch/lib/libtorch_cuda_cu.so"
    );
    assert_eq!(p["payload"]["files"][0]["form"], "static");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_1_10_without_lazy_library_is_refuted_with_the_path() {
    let (wheel, _) = corpus("torch-1.10.0-cu102", false);
    let p = plan(&wheel);
    assert_eq!(p["verdict"], "not-confined");
    assert!(p["lazy_library"].is_null());
    let w = p["witnesses"][0]["summary"].as_str().unwrap();
    assert!(
        w.contains("→ libtorch_cuda.so (NEEDED) → defines magma_"),
        "{w}"
    );
    assert_eq!(
        p["payload"]["files"][0]["path"],
        "torch/lib/libtorch_cuda.so"
    );
    assert_eq!(p["payload"]["files"][0]["reach"], "eager");
    // 1.10 registers 729 CUDA units with `_ZL24__sti____cudaRegisterAllv` and 625 with the
    // external-linkage `_Z24…` (readelf -s): the static estimate must count both spellings.
    let parts = p["payload"]["files"][0]["estimate"]["parts"]
        .as_array()
        .unwrap();
    let device = parts
        .iter()
        .find(|x| x["what"] == ".nv_fatbin")
        .expect("a device-code part");
    assert!(
        device["how"]
            .as_str()
            .unwrap()
            .contains(" of 1354 CUDA translation units"),
        "{device}"
    );
}

/// onnxruntime-gpu 1.31.1 (CUDA 13): the runtime and its Python module dlopen the execution
/// providers by name; the CUDA and TensorRT providers NEED cuBLAS (both) and cuDNN (TensorRT),
/// which NVIDIA's wheels provide. One glob selects the providers; two --dep make cuBLAS and cuDNN
/// one payload.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real onnxruntime-gpu wheel: cargo test --release --features full-tests"
)]
fn onnxruntime_gpu_providers_confine_cublas_and_cudnn() {
    let (wheel, tree) = corpus("onnxruntime-gpu-1.31.1", true);
    let capi = tree.unwrap().join("capi");
    let args = [
        "--lazy",
        "libonnxruntime_providers_*.so",
        "--dep",
        "cublas",
        "--dep",
        "cudnn",
    ];
    let p = plan_with(&wheel, &args);
    assert_eq!(p["verdict"], "confined", "{:#}", p["witnesses"]);
    assert_providers_are_lazy_and_the_payload_external(&p);
    // The CUDA provider alone is not enough: the TensorRT provider also reaches cuBLAS.
    let one = plan_with(
        &wheel,
        &[
            "--lazy",
            "libonnxruntime_providers_cuda.so",
            "--dep",
            "cublas",
            "--dep",
            "cudnn",
        ],
    );
    assert_eq!(one["verdict"], "not-confined");
    let w = one["witnesses"][0]["summary"].as_str().unwrap();
    assert!(
        w.contains("→ libonnxruntime_providers_tensorrt.so (lazy) → "),
        "{w}"
    );

    // The recipe forbids both payload packages in the slim variant; wheel refuses several providers.
    let dir = tempfile::tempdir().unwrap();
    recipe_forbids_the_payload_and_each_provider_verifies(&wheel, &capi, &args, dir.path());
    let wheels = dir.path().join("wheels");
    let mut wheel_args = vec!["wheel", "--quiet", "--out", wheels.to_str().unwrap()];
    wheel_args.extend(args);
    let o = run_path(&wheel_args, &wheel);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// onnxruntime-gpu's plan with the providers lazy: the three providers, each loaded lazily by
/// the Python module; cuBLAS and cuDNN outside the wheel, the provider table naming NVIDIA's
/// wheels and conda-forge's packages; the lazy output's bytes and variant.
fn assert_providers_are_lazy_and_the_payload_external(p: &serde_json::Value) {
    assert!(p["lazy_library"].is_null());
    let lazy: Vec<(&str, u64)> = p["lazy_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["path"].as_str().unwrap(), l["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        lazy,
        [
            (
                "onnxruntime/capi/libonnxruntime_providers_cuda.so",
                284_014_752
            ),
            (
                "onnxruntime/capi/libonnxruntime_providers_shared.so",
                14_632
            ),
            (
                "onnxruntime/capi/libonnxruntime_providers_tensorrt.so",
                994_968
            ),
        ]
    );
    for l in p["lazy_libraries"].as_array().unwrap() {
        assert_eq!(l["reach"], "lazy", "{l:#}");
        let from: Vec<&str> = l["loaded_by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["from"].as_str().unwrap())
            .collect();
        assert!(
            from.contains(
                &"onnxruntime/capi/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so"
            ),
            "{from:?}"
        );
    }
    // The payload is outside the wheel; the table names the NVIDIA wheels and conda-forge packages.
    let ext: Vec<(&str, &str, &serde_json::Value)> = p["payload"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap(),
                f["form"].as_str().unwrap(),
                &f["provider"],
            )
        })
        .collect();
    let cublas = serde_json::json!({"pip": "nvidia-cublas", "conda": "libcublas"});
    let cudnn = serde_json::json!({"pip": "nvidia-cudnn-cu13", "conda": "cudnn"});
    for want in [
        ("libcublas.so.13", "external", &cublas),
        ("libcublasLt.so.13", "external", &cublas),
        ("libcudnn.so.9", "external", &cudnn),
        ("libcudnn.so", "external", &cudnn),
    ] {
        assert!(ext.contains(&want), "{want:?} not in {ext:?}");
    }
    assert_eq!(p["input"]["cuda_runtime"], 13);
    let lazy_out = lazy_output(p);
    assert_eq!(lazy_out["bytes"], 284_014_752u64 + 14_632 + 994_968);
    assert_eq!(lazy_out["variants"][0]["name"], "cublas_cudnn");
}

/// `emit` of onnxruntime-gpu with `args` into `dir/recipes`: the recipe forbids both payload
/// packages in the slim variant, and each provider passes verify-variant (files in `capi`) with
/// its own contract as the recipe's test runs it.
fn recipe_forbids_the_payload_and_each_provider_verifies(
    wheel: &std::path::Path,
    capi: &std::path::Path,
    args: &[&str],
    dir: &std::path::Path,
) {
    let mut emit = vec![
        "emit",
        "--quiet",
        "--core-name",
        "onnxruntime",
        "--lazy-name",
        "onnxruntime-providers",
        "--variant-key",
        "providers_variant",
        "--out",
    ];
    let out = dir.join("recipes");
    emit.push(out.to_str().unwrap());
    emit.extend_from_slice(args);
    let o = run_path(&emit, wheel);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recipe = std::fs::read_to_string(out.join("rattler-build/recipe.yaml")).unwrap();
    assert!(
        recipe.contains("- libcublas <0.0a0") && recipe.contains("- cudnn <0.0a0"),
        "{recipe}"
    );
    // Each provider passes verify-variant with its own contract, as the recipe's test runs it: the
    // CUDA and TensorRT providers (no SONAME: known by file name) as the build with the payload,
    // providers_shared (no payload in either build) always as the slim one.
    for (lib, variant) in [
        ("cuda", "${{ providers_variant }}"),
        ("shared", "nocublas_cudnn"),
        ("tensorrt", "${{ providers_variant }}"),
    ] {
        let line = format!(
            "libonnxruntime_providers_{lib}.so\" --variant {variant} --contract contract-libonnxruntime_providers_{lib}.so.json"
        );
        assert!(recipe.contains(&line), "{line}");
        let file = capi.join(format!("libonnxruntime_providers_{lib}.so"));
        let contract = out.join(format!(
            "rattler-build/contract-libonnxruntime_providers_{lib}.so.json"
        ));
        let v = if lib == "shared" {
            "nocublas_cudnn"
        } else {
            "cublas_cudnn"
        };
        let o = run(&[
            "verify-variant",
            file.to_str().unwrap(),
            "--variant",
            v,
            "--contract",
            contract.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    }
}

fn plan_with(path: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["plan", "--json", "--quiet"];
    all.extend_from_slice(args);
    let o = run_path(&all, path);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let p = json(&o);
    assert_valid("docs/plan.schema.json", &p);
    p
}

/// The plan document's lazy output (the one with `role` `lazy`).
fn lazy_output(plan: &serde_json::Value) -> &serde_json::Value {
    plan["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["role"] == "lazy")
        .expect("the plan has a lazy output")
}
