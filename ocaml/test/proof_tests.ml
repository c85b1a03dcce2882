(* The proof tests of the bindings (docs/ocaml.md, docs/proofs.md), part of the test_larch
   suite: tree and stream proofs verified by the bindings and `larch proof verify`,
   merkle_tree_v2, and Tree2 proofs through ?encoding. *)

open Support
module C = Larch_context

(* An exception carrying larch's text. *)
let raises_error what f =
  match f () with
  | _ -> Alcotest.failf "%s: no exception" what
  | exception C.Error text ->
      Alcotest.(check bool) (what ^ ": larch's text") true
        (String.length text > 6 && String.sub text 0 6 = "larch:")

(* ---- Tree proofs made through the bindings verify with `larch proof verify` ---- *)

let test_proofs () =
  let dir = temp_dir "proofs" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = ref (C.empty index) in
  for i = 0 to 299 do
    ctxt := C.add !ctxt ["data"; "big"; string_of_int i] (Bytes.of_string (string_of_int (i * i)))
  done ;
  ctxt := C.add !ctxt ["data"; "a"; "b"] (Bytes.of_string "hello") ;
  let commit = C.commit ~time:0L ~message:"proofs" !ctxt in
  let root = C.Tree.hash (C.get_tree (C.checkout_exn index commit)) in
  List.iter
    (fun (encoding, name) ->
      let ops =
        C.Proof.[
          Find ["data"; "a"; "b"];
          Find ["data"; "big"; "17"];
          Find ["data"; "missing"];
          Add (["data"; "big"; "7"], Bytes.of_string "new");
          Remove ["data"; "a"];
        ]
      in
      let produced = C.Proof.produce_tree_proof ~encoding index commit ops in
      Alcotest.(check string) (name ^ ": before is the tree") (hex root) (hex produced.before) ;
      let before, after, results = C.Proof.verify_tree_proof ~encoding produced.proof ops in
      Alcotest.(check string) (name ^ ": verified before") (hex root) (hex before) ;
      Alcotest.(check string) (name ^ ": verified after") (hex produced.after) (hex after) ;
      Alcotest.(check bool) (name ^ ": results") true (results = produced.results) ;
      (match results with
      | C.Proof.Value (Some v) :: C.Proof.Value (Some w) :: C.Proof.Value None :: _ ->
          Alcotest.(check string) "found" "hello" (Bytes.to_string v) ;
          Alcotest.(check string) "found 17" "289" (Bytes.to_string w)
      | _ -> Alcotest.fail "unexpected results") ;
      let file = Filename.concat dir ("proof." ^ name) in
      let oc = open_out_bin file in
      output_bytes oc produced.proof ;
      close_out oc ;
      let code, out =
        run
          [larch_bin (); "proof"; "verify"; file; "--encoding"; name; "--hash"; hex root;
           "--find"; "data/a/b"; "--find"; "data/big/17"; "--find"; "data/missing";
           "--update"; "add:data/big/7=" ^ hex "new"; "--update"; "remove:data/a"]
      in
      Alcotest.(check int) (name ^ ": larch proof verify accepts it") 0 code ;
      Alcotest.(check bool) (name ^ ": and finds the value") true
        (List.mem ("find data/a/b " ^ hex "hello") (String.split_on_char '\n' out)) ;
      Alcotest.(check bool) (name ^ ": and the after hash") true
        (List.mem ("after " ^ C.hash_to_b58 produced.after) (String.split_on_char '\n' out)) ;
      (* A proof for other operations (reading a blinded part) is rejected. *)
      let code, _ =
        run [larch_bin (); "proof"; "verify"; file; "--encoding"; name; "--find"; "data/big/18"]
      in
      Alcotest.(check int) (name ^ ": a read outside the proof is rejected") 1 code)
    [(C.Proof.V1, "v1"); (C.Proof.V2, "v2")] ;
  C.close index ;
  remove_dir dir

(* ---- merkle_tree_v2: Octez's leaf kinds, verified by the bindings and `larch proof verify` ---- *)

let test_merkle_tree_v2 () =
  let dir = temp_dir "merkle-tree-v2" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = ref (C.empty index) in
  for i = 0 to 299 do
    ctxt := C.add !ctxt ["data"; "big"; string_of_int i] (Bytes.of_string (string_of_int (i * i)))
  done ;
  ctxt := C.add !ctxt ["data"; "a"; "b"] (Bytes.of_string "hello") ;
  ctxt := C.add !ctxt ["data"; "a"; "c"; "d"] (Bytes.of_string "deep") ;
  ctxt := C.add !ctxt ["other"; "x"] (Bytes.of_string "outside") ;
  let commit = C.commit ~time:0L ~message:"merkle" !ctxt in
  let ctxt = C.checkout_exn index commit in
  let root = C.Tree.hash (C.get_tree ctxt) in
  List.iter
    (fun (encoding, name) ->
      (* Hole reads nothing: the proof holds the blinded root, for a computation reading nothing. *)
      let hole = C.merkle_tree_v2 ~encoding ctxt C.Proof.Hole ["a"] in
      let before, after, _ = C.Proof.verify_tree_proof ~encoding hole [] in
      Alcotest.(check string) (name ^ ": hole before") (hex root) (hex before) ;
      Alcotest.(check string) (name ^ ": hole after") (hex root) (hex after) ;
      raises_error (name ^ ": hole reveals no value") (fun () ->
          C.Proof.verify_tree_proof ~encoding hole [C.Proof.Find ["data"; "a"; "b"]]) ;
      (* Raw_context of a directory: everything below data/a, nothing beside it. *)
      let raw = C.merkle_tree_v2 ~encoding ctxt C.Proof.Raw_context ["a"] in
      let before, after, results =
        C.Proof.verify_tree_proof ~encoding raw
          C.Proof.[Find ["data"; "a"; "b"]; Find ["data"; "a"; "c"; "d"]; Mem_tree ["data"; "a"; "c"]]
      in
      Alcotest.(check string) (name ^ ": raw before") (hex root) (hex before) ;
      Alcotest.(check string) (name ^ ": raw after") (hex root) (hex after) ;
      (match results with
      | [C.Proof.Value (Some b); C.Proof.Value (Some d); C.Proof.Bool true] ->
          Alcotest.(check string) (name ^ ": b") "hello" (Bytes.to_string b) ;
          Alcotest.(check string) (name ^ ": d") "deep" (Bytes.to_string d)
      | _ -> Alcotest.fail "unexpected results") ;
      raises_error (name ^ ": raw does not reveal data/big") (fun () ->
          C.Proof.verify_tree_proof ~encoding raw [C.Proof.Find ["data"; "big"; "3"]]) ;
      raises_error (name ^ ": raw does not reveal other/") (fun () ->
          C.Proof.verify_tree_proof ~encoding raw [C.Proof.Find ["other"; "x"]]) ;
      (* Raw_context of a 300-entry directory: every value, checked by `larch proof verify`. *)
      let big = C.merkle_tree_v2 ~encoding ctxt C.Proof.Raw_context ["big"] in
      let file = Filename.concat dir ("merkle." ^ name) in
      let oc = open_out_bin file in
      output_bytes oc big ;
      close_out oc ;
      let finds = List.concat_map (fun i -> ["--find"; "data/big/" ^ string_of_int i]) [0; 17; 299] in
      let code, out =
        run ([larch_bin (); "proof"; "verify"; file; "--encoding"; name; "--hash"; hex root] @ finds)
      in
      Alcotest.(check int) (name ^ ": larch proof verify accepts it") 0 code ;
      Alcotest.(check bool) (name ^ ": and finds 17") true
        (List.mem ("find data/big/17 " ^ hex "289") (String.split_on_char '\n' out)))
    [(C.Proof.V1, "v1"); (C.Proof.V2, "v2")] ;
  C.close index ;
  remove_dir dir

(* ---- Tree2: a proof of the binary-tree context, written by hand from the spec, verified ---- *)

let test_tree2 () =
  let dir = temp_dir "tree2" in
  let index = C.init (Filename.concat dir "store") in
  (* {a -> "x"; b -> "y"}: two entries, hashed flat in both contexts (32-ary and binary). *)
  let ctxt = C.add (C.add (C.empty index) ["a"] (Bytes.of_string "x")) ["b"] (Bytes.of_string "y") in
  let root = C.Tree.hash (C.get_tree ctxt) in
  let hash_y = C.Tree.hash (C.Tree.of_value ctxt (Bytes.of_string "y")) in
  let u32 n = String.init 4 (fun i -> Char.chr ((n lsr (8 * (3 - i))) land 0xff)) in
  (* V2.Tree2: kinds, version 2, before, after, Node of 2 entries (0x82): a -> Value "x",
     b -> Blinded_value. V1.Tree2: version, kinded hashes, Node (02, u32 byte size). *)
  let v2 = "\x03\x00\x02" ^ root ^ root ^ "\x82\x01a\xc0\x01x\x01b\xc8" ^ hash_y in
  let entries = "\x01a\x00" ^ u32 1 ^ "x" ^ "\x01b\x01" ^ hash_y in
  let v1 = "\x00\x02\x01" ^ root ^ "\x01" ^ root ^ "\x02" ^ u32 (String.length entries) ^ entries in
  List.iter
    (fun (encoding, name, bytes) ->
      let before, after, results =
        C.Proof.verify_tree_proof ~encoding (Bytes.of_string bytes) [C.Proof.Find ["a"]]
      in
      Alcotest.(check string) (name ^ ": before") (hex root) (hex before) ;
      Alcotest.(check string) (name ^ ": after") (hex root) (hex after) ;
      (match results with
      | [C.Proof.Value (Some x)] -> Alcotest.(check string) (name ^ ": a") "x" (Bytes.to_string x)
      | _ -> Alcotest.fail "unexpected results") ;
      raises_error (name ^ ": b is blinded") (fun () ->
          C.Proof.verify_tree_proof ~encoding (Bytes.of_string bytes) [C.Proof.Find ["b"]]))
    [(C.Proof.V2_tree2, "v2 tree2", v2); (C.Proof.V1_tree2, "v1 tree2", v1)] ;
  (* Read as a Tree32 proof, its version (2: binary) is refused; larch does not produce Tree2. *)
  raises_error "a Tree2 proof is not a Tree32 proof" (fun () ->
      C.Proof.verify_tree_proof ~encoding:C.Proof.V2 (Bytes.of_string v2) [C.Proof.Find ["a"]]) ;
  raises_error "no Tree2 production" (fun () ->
      C.Proof.produce_tree_proof_of_tree ~encoding:C.Proof.V2_tree2 (C.get_tree ctxt) [C.Proof.Find ["a"]]) ;
  raises_error "no Tree2 merkle_tree_v2" (fun () ->
      C.merkle_tree_v2 ~encoding:C.Proof.V1_tree2 ctxt C.Proof.Hole []) ;
  C.close index ;
  remove_dir dir

(* ---- Stream proofs: produced and verified through the bindings and `larch proof --stream` ---- *)

let test_stream_proofs () =
  let dir = temp_dir "stream-proofs" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = ref (C.empty index) in
  for i = 0 to 299 do
    ctxt := C.add !ctxt ["data"; "big"; string_of_int i] (Bytes.of_string (string_of_int (i * i)))
  done ;
  ctxt := C.add !ctxt ["data"; "a"; "b"] (Bytes.of_string "hello") ;
  let commit = C.commit ~time:0L ~message:"stream proofs" !ctxt in
  let root = C.Tree.hash (C.get_tree (C.checkout_exn index commit)) in
  let ops =
    C.Proof.[
      Find ["data"; "a"; "b"];
      Find ["data"; "big"; "17"];
      Add (["data"; "big"; "7"], Bytes.of_string "new");
    ]
  in
  List.iter
    (fun (encoding, name) ->
      let produced = C.Proof.produce_stream_proof ~encoding index commit ops in
      Alcotest.(check string) (name ^ ": before is the tree") (hex root) (hex produced.before) ;
      let before, after, results = C.Proof.verify_stream_proof ~encoding produced.proof ops in
      Alcotest.(check string) (name ^ ": verified before") (hex root) (hex before) ;
      Alcotest.(check string) (name ^ ": verified after") (hex produced.after) (hex after) ;
      (match results with
      | [C.Proof.Value (Some v); C.Proof.Value (Some w); C.Proof.Unit] ->
          Alcotest.(check string) "found" "hello" (Bytes.to_string v) ;
          Alcotest.(check string) "found 17" "289" (Bytes.to_string w)
      | _ -> Alcotest.fail "unexpected results") ;
      (* The after hash is the one the context computes for the same update. *)
      let updated = C.add (C.checkout_exn index commit) ["data"; "big"; "7"] (Bytes.of_string "new") in
      Alcotest.(check string) (name ^ ": after is the context's") (hex (C.Tree.hash (C.get_tree updated)))
        (hex after) ;
      (* Not a tree proof; not a proof of fewer operations; not when one byte changes. *)
      raises_error (name ^ ": read as a tree proof") (fun () ->
          C.Proof.verify_tree_proof ~encoding produced.proof ops) ;
      raises_error (name ^ ": too long for fewer operations") (fun () ->
          C.Proof.verify_stream_proof ~encoding produced.proof [C.Proof.Find ["data"; "a"; "b"]]) ;
      let tampered = Bytes.copy produced.proof in
      let last = Bytes.length tampered - 1 in
      Bytes.set tampered last (Char.chr (Char.code (Bytes.get tampered last) lxor 1)) ;
      raises_error (name ^ ": one byte changed") (fun () ->
          C.Proof.verify_stream_proof ~encoding tampered ops) ;
      let file = Filename.concat dir ("stream." ^ name) in
      let oc = open_out_bin file in
      output_bytes oc produced.proof ;
      close_out oc ;
      let code, out =
        run
          [larch_bin (); "proof"; "verify"; file; "--stream"; "--encoding"; name; "--hash"; hex root;
           "--find"; "data/a/b"; "--find"; "data/big/17"; "--update"; "add:data/big/7=" ^ hex "new"]
      in
      Alcotest.(check int) (name ^ ": larch proof verify --stream accepts it") 0 code ;
      Alcotest.(check bool) (name ^ ": and the after hash") true
        (List.mem ("after " ^ C.hash_to_b58 produced.after) (String.split_on_char '\n' out)))
    [(C.Proof.V1, "v1"); (C.Proof.V2, "v2")] ;
  C.close index ;
  remove_dir dir

