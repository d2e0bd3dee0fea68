//! The real thing: PyPI CUDA torch wheels (fetched on first use by fixtures/corpus/fetch).
//! Three layouts, one code path: 2.11 (lazy library, static MAGMA), 1.13 (lazy library loaded by a
//! split libtorch_cuda_cu.so), 1.10 (no lazy library, MAGMA in libtorch_cuda.so).

use crate::common::*;

use splitpkg::analysis::document::InspectReport;
use splitpkg::analysis::graph::{Edge, EdgeKind, How, NodeKind, Reach};
use splitpkg::analysis::payload::PartKind;
use splitpkg::analysis::plan::{Plan, PlanOutput, Role};
use splitpkg::analysis::providers::Provider;
use splitpkg::analysis::verdict::{PayloadForm, Verdict};

fn plan(path: &std::path::Path) -> Plan {
    plan_with(path, &[])
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
fn assert_torch_2_11_plan(p: &Plan, prefix: &str) {
    assert_eq!(p.verdict, Verdict::Confined, "{:#?}", p.reasons);
    let lazy = p.lazy_library.as_ref().unwrap();
    assert_eq!(lazy.path, format!("{prefix}lib/libtorch_cuda_linalg.so"));
    assert_eq!(lazy.size, 53_532_193);
    let by = &lazy.loaded_by[0];
    assert_eq!(by.from, format!("{prefix}lib/libtorch_cuda.so"));
    assert_eq!(by.kind, EdgeKind::Lazy);
    assert_eq!(
        by.how,
        format!("rpath of libtorch_cuda.so ($ORIGIN → {prefix}lib)")
    );
    // MAGMA is static in the lazy library, and only there.
    let files = &p.payload.files;
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].form, PayloadForm::Static);
    assert_eq!(
        files[0].path,
        format!("{prefix}lib/libtorch_cuda_linalg.so")
    );
    let estimate = files[0].estimate.as_ref().unwrap();
    let est = estimate.bytes;
    // The notes measured ~48-50 MB of 53.5 MB as MAGMA; the estimate must land near that.
    assert!((45_000_000..53_000_000).contains(&est), "estimate {est}");
    let fatbin = estimate
        .parts
        .iter()
        .find(|x| x.what == PartKind::NvFatbin)
        .unwrap();
    assert_eq!(
        fatbin.bytes, 35_280_792,
        "all device code of the linalg library is MAGMA"
    );
    // Device code: three libraries; the linalg library's is all MAGMA; the CUDA 13 runtime's
    // driver floor (580) is above what zstd needs (550.54.14), so no extra constraint.
    let d = p.device_code.as_ref().unwrap();
    assert_eq!(d.libraries, 3);
    assert_eq!(d.stored, 297_806_224u64 + 35_280_792 + 453_568);
    assert_eq!(d.compression, ["zstd"]);
    assert_eq!(d.driver_minimum.as_deref(), Some("580"));
    assert!(!d.compression_raises_floor);
    assert_eq!(p.payload.device_code, 35_280_792);
    let lazy_out = lazy_output(p);
    assert_eq!(lazy_out.device_code, 35_280_792);
    // libtorch_cuda.so keeps the has_magma glue.
    assert!(p.warnings.iter().any(|w| {
        w.file == format!("{prefix}lib/libtorch_cuda.so")
            && w.examples.iter().any(|e| e.contains("set_magma_init_fn"))
    }));
}

/// Whether an edge's resolution is of the wanted kind (`How`'s variants carry different fields).
type ResolvedBy = fn(&How) -> bool;

/// libtorch_cuda.so's other lazy names in the tree are lazy system / external edges, and the CUDA
/// runtime wheels sit outside the tree (the search path says so).
fn assert_torch_2_11_lazy_edges(tree: &std::path::Path) {
    // libtorch_cuda.so's other lazy names are lazy system / external edges.
    let o = run_path(&["inspect", "--json", "--quiet"], tree);
    let ins = typed::<InspectReport>(&o);
    let lazy_from_cuda: Vec<&Edge> = ins
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Lazy && ins.nodes[e.from].name == "lib/libtorch_cuda.so")
        .collect();
    let wanted: [(&str, NodeKind, ResolvedBy); 4] = [
        ("libcuda.so.1", NodeKind::System, |h| {
            matches!(h, How::System { .. })
        }),
        ("libnvidia-ml.so.1", NodeKind::System, |h| {
            matches!(h, How::System { .. })
        }),
        ("libibverbs.so.1", NodeKind::External, |h| {
            matches!(h, How::NotFound { .. })
        }),
        ("libtorch_cuda_linalg.so", NodeKind::File, |h| {
            matches!(h, How::Rpath { .. })
        }),
    ];
    for (name, kind, via) in wanted {
        assert!(
            lazy_from_cuda
                .iter()
                .any(|e| e.name == name && ins.nodes[e.to].kind == kind && via(&e.how)),
            "{name} ({kind:?}) not in {lazy_from_cuda:?}"
        );
    }
    // The CUDA runtime wheels sit outside the tree; the search path says so.
    let cublas = ins.edges.iter().find(|e| e.name == "libcublas.so.13");
    match &cublas.expect("a libcublas.so.13 edge").how {
        How::NotFound { outside, .. } => assert!(
            outside.iter().any(|d| d == "$ORIGIN/../../nvidia/cu13/lib"),
            "{outside:?}"
        ),
        other => panic!("libcublas.so.13 resolved: {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_1_13_split_cuda_library_is_confined() {
    let (wheel, _) = corpus("torch-1.13.1-cu117", false);
    let p = plan(&wheel);
    assert_eq!(p.verdict, Verdict::Confined, "{:#?}", p.reasons);
    assert_eq!(
        p.lazy_library.as_ref().unwrap().loaded_by[0].from,
        "torch/lib/libtorch_cuda_cu.so"
    );
    assert_eq!(p.payload.files[0].form, PayloadForm::Static);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_1_10_without_lazy_library_is_refuted_with_the_path() {
    let (wheel, _) = corpus("torch-1.10.0-cu102", false);
    let p = plan(&wheel);
    assert_eq!(p.verdict, Verdict::NotConfined);
    assert!(p.lazy_library.is_none());
    let w = &p.witnesses[0].summary;
    assert!(
        w.contains("→ libtorch_cuda.so (NEEDED) → defines magma_"),
        "{w}"
    );
    let file = &p.payload.files[0];
    assert_eq!(file.path, "torch/lib/libtorch_cuda.so");
    assert_eq!(file.reach, Reach::Eager);
    // 1.10 registers 729 CUDA units with `_ZL24__sti____cudaRegisterAllv` and 625 with the
    // external-linkage `_Z24…` (readelf -s): the static estimate must count both spellings.
    let parts = &file.estimate.as_ref().unwrap().parts;
    let device = parts
        .iter()
        .find(|x| x.what == PartKind::NvFatbin)
        .expect("a device-code part");
    assert!(
        device.how.contains(" of 1354 CUDA translation units"),
        "{device:?}"
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
    assert_eq!(p.verdict, Verdict::Confined, "{:#?}", p.witnesses);
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
    assert_eq!(one.verdict, Verdict::NotConfined);
    let w = &one.witnesses[0].summary;
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
fn assert_providers_are_lazy_and_the_payload_external(p: &Plan) {
    assert!(p.lazy_library.is_none());
    let lazy: Vec<(&str, u64)> = p
        .lazy_libraries
        .iter()
        .map(|l| (l.path.as_str(), l.size))
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
    for l in &p.lazy_libraries {
        assert_eq!(l.reach, Reach::Lazy, "{l:#?}");
        let from: Vec<&str> = l.loaded_by.iter().map(|s| s.from.as_str()).collect();
        assert!(
            from.contains(
                &"onnxruntime/capi/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so"
            ),
            "{from:?}"
        );
    }
    // The payload is outside the wheel; the table names the NVIDIA wheels and conda-forge packages.
    let ext: Vec<(&str, PayloadForm, Option<&Provider>)> = p
        .payload
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.form, f.provider.as_ref()))
        .collect();
    let provider = |pip: &str, conda: &str| Provider {
        pip: Some(pip.into()),
        conda: Some(conda.into()),
    };
    let cublas = provider("nvidia-cublas", "libcublas");
    let cudnn = provider("nvidia-cudnn-cu13", "cudnn");
    for want in [
        ("libcublas.so.13", PayloadForm::External, Some(&cublas)),
        ("libcublasLt.so.13", PayloadForm::External, Some(&cublas)),
        ("libcudnn.so.9", PayloadForm::External, Some(&cudnn)),
        ("libcudnn.so", PayloadForm::External, Some(&cudnn)),
    ] {
        assert!(ext.contains(&want), "{want:?} not in {ext:?}");
    }
    assert_eq!(p.input.cuda_runtime, Some(13));
    let lazy_out = lazy_output(p);
    assert_eq!(lazy_out.bytes, 284_014_752u64 + 14_632 + 994_968);
    assert_eq!(lazy_out.variants[0].name, "cublas_cudnn");
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

fn plan_with(path: &std::path::Path, args: &[&str]) -> Plan {
    let mut all = vec!["plan", "--json", "--quiet"];
    all.extend_from_slice(args);
    let o = run_path(&all, path);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    assert_valid("docs/plan.schema.json", &json(&o));
    typed(&o)
}

/// The plan document's lazy output (the one with `role` `lazy`).
fn lazy_output(plan: &Plan) -> &PlanOutput {
    plan.outputs
        .iter()
        .find(|o| o.role == Role::Lazy)
        .expect("the plan has a lazy output")
}
